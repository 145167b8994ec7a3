// D14: Idempotency-Key on createPet, black-box over HTTP (both engines with
// PETSTORE_TEST_DATABASE=postgres).
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { issueApiKey } from '../../src/keys/issue.ts'
import { openPostgresStore } from '../../src/store/postgres/store.ts'
import { openSqliteStore } from '../../src/store/sqlite/store.ts'
import { StoreUnavailableError } from '../../src/store/store.ts'
import { failingStore } from '../helpers/failing-store.ts'
import { TEST_POOLER } from '../helpers/postgres.ts'
import { exchange } from '../helpers/raw-http.ts'
import {
  createPet,
  errorOf,
  ManualClock,
  openTestStore,
  startServer,
  type TestServer,
  type TestStore,
} from '../helpers/server.ts'
import { listAll, type Pet, postRaw } from './support.ts'

let seq = 0
/** A key no other test in this run uses. */
const newKey = (label: string) => `${label}-${process.pid}-${++seq}`

function withKey(key: string, extra: Record<string, string> = {}): RequestInit {
  return { headers: { 'idempotency-key': key, ...extra } }
}

async function created(response: Response): Promise<Pet> {
  assert.equal(response.status, 201, await response.clone().text())
  return (await response.json()) as Pet
}

describe('Idempotency-Key on createPet (D14)', () => {
  let server: TestServer

  before(async () => {
    server = await startServer()
  })
  after(() => server.close())

  it('the first request is processed as usual; a repeat replays it and makes no pet', async () => {
    const key = newKey('replay')
    const before = (await listAll(server)).length
    const first = await createPet(server, { name: 'Rex', categoryId: 3 }, withKey(key))
    const pet = await created(first)
    assert.equal(first.headers.get('location'), `/v1/pets/${pet.id}`)
    assert.equal(first.headers.get('idempotent-replayed'), null)
    // The same NewPet written another way: keys in another order, other white space.
    const again = await postRaw(server, '{ "categoryId" : 3,\n "name": "Rex" }', 'application/json')
    await again.body?.cancel()
    const repeat = await server.request('/v1/pets', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: '{ "categoryId" : 3,\n "name": "Rex" }',
    })
    assert.equal(repeat.status, 201)
    assert.equal(repeat.headers.get('idempotent-replayed'), 'true')
    assert.equal(repeat.headers.get('location'), `/v1/pets/${pet.id}`)
    assert.match(repeat.headers.get('content-type') ?? '', /^application\/json/)
    assert.deepEqual(await repeat.json(), pet)
    // One pet from the keyed requests, one from the request without a key.
    assert.equal((await listAll(server)).length, before + 2)
  })

  it('the quoted structured-field form is the same key', async () => {
    const key = newKey('quoted')
    const pet = await created(await createPet(server, { name: 'Q', categoryId: 1 }, withKey(key)))
    const quoted = await createPet(server, { name: 'Q', categoryId: 1 }, withKey(`"${key}"`))
    assert.equal(quoted.status, 201)
    assert.equal(quoted.headers.get('idempotent-replayed'), 'true')
    assert.deepEqual(await quoted.json(), pet)
  })

  it('the same key with another body is 422 idempotency_key_reused', async () => {
    const key = newKey('reused')
    await created(await createPet(server, { name: 'A', categoryId: 1 }, withKey(key)))
    for (const other of [
      { name: 'B', categoryId: 1 },
      { name: 'A', categoryId: 1, status: 'sold' },
    ]) {
      const response = await createPet(server, other, withKey(key))
      assert.equal(response.status, 422)
      const body = await errorOf(response)
      assert.equal(body.code, 'idempotency_key_reused')
      assert.match(body.message, /Idempotency-Key/)
    }
  })

  it('a malformed key is 400 invalid_request naming the header', async () => {
    for (const bad of ['', 'a'.repeat(256), 'two words', '""', '"a b"', 'caf\u00e9']) {
      const response = await createPet(server, { name: 'X', categoryId: 1 }, withKey(bad))
      assert.equal(response.status, 400, JSON.stringify(bad))
      const body = await errorOf(response)
      assert.equal(body.code, 'invalid_request')
      // The handler's words (routes/idempotency.ts): it judges the key, not the schema the
      // document shows (documentedOnly, src/http/validation.ts).
      assert.equal(
        body.message,
        'the Idempotency-Key header must be 1 to 255 visible ASCII characters (0x21–0x7E), optionally as a quoted string',
        JSON.stringify(bad),
      )
    }
    // The longest key is accepted, and so is every visible ASCII character.
    const visible = Array.from({ length: 0x7e - 0x21 + 1 }, (_, i) => String.fromCharCode(0x21 + i))
    for (const good of ['k'.repeat(255), visible.join('')]) {
      await created(await createPet(server, { name: 'X', categoryId: 1 }, withKey(good)))
    }
  })

  it('the header twice: the same value is one key, different values are a 400', async () => {
    const key = newKey('twice')
    const body = JSON.stringify({ name: 'T', categoryId: 1 })
    const send = (values: string[]) => {
      const head = [
        'POST /v1/pets HTTP/1.1',
        'host: localhost',
        'connection: close',
        `authorization: Bearer ${server.key}`,
        'content-type: application/json',
        `content-length: ${Buffer.byteLength(body)}`,
        ...values.map((value) => `idempotency-key: ${value}`),
      ]
      return exchange(server.url, `${head.join('\r\n')}\r\n\r\n${body}`, 2000)
    }
    const same = await send([key, `"${key}"`])
    assert.equal(same.responses[0]?.status, 201)
    const different = await send([key, `${key}-other`])
    const answer = different.responses[0]
    assert.equal(answer?.status, 400)
    assert.match(answer?.body ?? '', /Idempotency-Key/)
  })

  it('a request that fails validation is not stored: the same key then works', async () => {
    const key = newKey('invalid')
    const bad = await createPet(server, { name: '', categoryId: 1 }, withKey(key))
    assert.equal(bad.status, 400)
    const again = await createPet(server, { name: '', categoryId: 1 }, withKey(key))
    assert.equal(again.status, 400, 'the same request fails the same way')
    await bad.body?.cancel()
    await again.body?.cancel()
    const good = await createPet(server, { name: 'Fine', categoryId: 1 }, withKey(key))
    assert.equal(good.status, 201)
    assert.equal(good.headers.get('idempotent-replayed'), null)
    await good.body?.cancel()
  })

  it('keys are scoped to the API key: the same key from two API keys makes two pets', async () => {
    const { key: otherApiKey } = await issueApiKey(server.store.apiKeys, 'production', 'other')
    const key = newKey('scoped')
    const mine = await created(await createPet(server, { name: 'S', categoryId: 1 }, withKey(key)))
    const theirs = await created(
      await createPet(
        server,
        { name: 'S', categoryId: 1 },
        withKey(key, { authorization: `Bearer ${otherApiKey}` }),
      ),
    )
    assert.notEqual(mine.id, theirs.id)
  })

  it('50 concurrent requests with one key and one body make exactly one pet', async () => {
    const key = newKey('fifty')
    const before = (await listAll(server)).length
    const responses = await Promise.all(
      Array.from({ length: 50 }, () =>
        createPet(server, { name: 'Fifty', categoryId: 5, status: 'pending' }, withKey(key)),
      ),
    )
    const pets: Pet[] = []
    let replayed = 0
    for (const response of responses) {
      if (response.status === 409) {
        const body = await errorOf(response)
        assert.equal(body.code, 'idempotency_key_in_use')
        assert.equal(response.headers.get('retry-after'), '1')
        continue
      }
      pets.push(await created(response))
      if (response.headers.get('idempotent-replayed') === 'true') replayed++
    }
    assert.ok(pets.length > 0, 'at least one 201')
    const ids = new Set(pets.map((p) => p.id))
    assert.equal(ids.size, 1, 'every 201 carries the same pet')
    assert.equal(replayed, pets.length - 1, 'every 201 but the first is a replay')
    const all = await listAll(server)
    assert.equal(all.length, before + 1, 'exactly one pet was made')
    assert.deepEqual(
      all.find((p) => p.id === pets[0]?.id),
      pets[0],
    )
  })
})

describe('Idempotency-Key expiry and the rate limit (D14)', () => {
  const clock = new ManualClock(Date.UTC(2027, 0, 1, 0, 0, 0))
  let server: TestServer

  before(async () => {
    server = await startServer({ clock, idempotencyTtlSeconds: 60, rateLimit: 3 })
  })
  after(() => server.close())

  it('a record is replayed until its TTL has passed, then the key is new again', async () => {
    clock.advance(60_000)
    const key = newKey('ttl')
    const first = await created(await createPet(server, { name: 'E', categoryId: 1 }, withKey(key)))
    clock.advance(59_999)
    const replay = await createPet(server, { name: 'E', categoryId: 1 }, withKey(key))
    assert.equal(replay.headers.get('idempotent-replayed'), 'true')
    assert.deepEqual(await replay.json(), first)
    clock.advance(1)
    const fresh = await createPet(server, { name: 'E', categoryId: 1 }, withKey(key))
    const second = await created(fresh)
    assert.equal(fresh.headers.get('idempotent-replayed'), null)
    assert.notEqual(second.id, first.id)
  })

  it('replays count against the rate limit', async () => {
    clock.advance(60_000)
    const key = newKey('limit')
    const first = await createPet(server, { name: 'L', categoryId: 1 }, withKey(key))
    assert.equal(first.status, 201)
    await first.body?.cancel()
    for (let i = 0; i < 2; i++) {
      const replay = await createPet(server, { name: 'L', categoryId: 1 }, withKey(key))
      assert.equal(replay.headers.get('idempotent-replayed'), 'true')
      await replay.body?.cancel()
    }
    const over = await createPet(server, { name: 'L', categoryId: 1 }, withKey(key))
    assert.equal(over.status, 429)
    assert.equal((await errorOf(over)).code, 'rate_limited')
  })
})

describe('Idempotency-Key across a restart (D14)', () => {
  it('a repeat after the service restarts on the same database replays the first', async () => {
    // A key from the environment has the same id in every process, as after a restart.
    const apiKey = 'restart-test-key-0123456789abcdefghijklmnopqrstuvwxyz'
    const auth = { authorization: `Bearer ${apiKey}` }
    const database = await openTestStore()
    const key = newKey('restart')
    try {
      const first = await startServer({ store: database.store, bootstrapKeys: [apiKey] })
      const pet = await created(
        await createPet(first, { name: 'R', categoryId: 2 }, withKey(key, auth)),
      )
      await first.close()
      await database.store.close()
      const store = database.location.startsWith('postgres')
        ? openPostgresStore({ url: database.location, poolSize: 2, pooler: TEST_POOLER })
        : openSqliteStore({ path: database.location })
      const second = await startServer({ store, bootstrapKeys: [apiKey] })
      try {
        const replay = await createPet(second, { name: 'R', categoryId: 2 }, withKey(key, auth))
        assert.equal(replay.headers.get('idempotent-replayed'), 'true')
        assert.deepEqual(await replay.json(), pet)
      } finally {
        await second.close()
        await store.close()
      }
    } finally {
      await database.close()
    }
  })
})

describe('Idempotency-Key and 5xx answers (D14)', () => {
  let database: TestStore
  let server: TestServer
  /** What the next createIdempotent does before answering 503. */
  let next: 'commit' | 'fail' | undefined

  before(async () => {
    database = await openTestStore()
    const real = database.store
    await real.migrate()
    // The real store, except that one create answers 503: after committing (the answer was
    // lost), or without writing anything.
    const store = failingStore(real, {
      pets: {
        createIdempotent: async (pet, claim) => {
          const failure = next
          next = undefined
          if (failure === 'commit') await real.pets.createIdempotent(pet, claim)
          if (failure !== undefined) throw new StoreUnavailableError('the answer was lost')
          return real.pets.createIdempotent(pet, claim)
        },
      },
    })
    server = await startServer({ store })
  })
  after(async () => {
    await server.close()
    await database.close()
  })

  it('a 503 that wrote nothing is not stored: the retry creates the pet', async () => {
    const key = newKey('503-none')
    const before = (await listAll(server)).length
    next = 'fail'
    const failed = await createPet(server, { name: 'F', categoryId: 1 }, withKey(key))
    assert.equal(failed.status, 503)
    await failed.body?.cancel()
    const retry = await createPet(server, { name: 'F', categoryId: 1 }, withKey(key))
    assert.equal(retry.headers.get('idempotent-replayed'), null)
    await created(retry)
    assert.equal((await listAll(server)).length, before + 1)
  })

  it('a 503 after the pet committed: the retry replays that pet, no second one', async () => {
    const key = newKey('503-committed')
    const before = await listAll(server)
    next = 'commit'
    const failed = await createPet(server, { name: 'C', categoryId: 1 }, withKey(key))
    assert.equal(failed.status, 503)
    await failed.body?.cancel()
    const committed = (await listAll(server)).slice(before.length)
    assert.equal(committed.length, 1, 'the first request had in fact committed')
    const retry = await createPet(server, { name: 'C', categoryId: 1 }, withKey(key))
    assert.equal(retry.headers.get('idempotent-replayed'), 'true')
    assert.deepEqual(await created(retry), committed[0])
    assert.equal((await listAll(server)).length, before.length + 1)
  })
})
