// D14 across instances: three service processes on one PostgreSQL database. The unique key on
// (API key, Idempotency-Key) decides between them; a retry sent to another instance, even after
// the first one was killed, replays the original.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { createTestDatabase, postgresSkipReason, type TestDatabase } from '../helpers/postgres.ts'
import { type ServiceProcess, startService } from '../helpers/process.ts'
import { call, type Pet, sharedKey, walk } from './support.ts'

const INSTANCES = 3

const skip = await postgresSkipReason()

describe('Idempotency-Key across three instances on one PostgreSQL database', { skip }, () => {
  let db: TestDatabase
  let services: ServiceProcess[] = []
  let urls: string[] = []
  const key = sharedKey()

  before(async () => {
    db = await createTestDatabase()
    const env = {
      DATABASE_URL: db.url,
      DATABASE_POOLER: db.pooler,
      PETSTORE_RATE_LIMIT: '0',
      PETSTORE_API_KEYS: key,
    }
    services = await Promise.all(Array.from({ length: INSTANCES }, () => startService(env)))
    urls = services.map((s) => s.url)
  })
  after(async () => {
    await Promise.all(services.map((s) => s.stop()))
    await db.drop()
  })

  const create = (url: string, idempotencyKey: string, body: object) =>
    call(url, key, '/v1/pets', {
      method: 'POST',
      headers: { 'idempotency-key': idempotencyKey },
      body: JSON.stringify(body),
    })

  test('a retry sent to another instance replays the original', async () => {
    const body = { name: 'Across', categoryId: 9 }
    const first = await create(urls[0] as string, 'across-1', body)
    assert.equal(first.status, 201)
    const pet = (await first.json()) as Pet
    for (const url of urls.slice(1)) {
      const retry = await create(url, 'across-1', body)
      assert.equal(retry.status, 201)
      assert.equal(retry.headers.get('idempotent-replayed'), 'true')
      assert.equal(retry.headers.get('location'), `/v1/pets/${pet.id}`)
      assert.deepEqual(await retry.json(), pet)
    }
  })

  test('60 concurrent requests with one key over three instances make one pet', async () => {
    const body = { name: 'Sixty', categoryId: 6 }
    const responses = await Promise.all(
      Array.from({ length: 60 }, (_, i) => create(urls[i % INSTANCES] as string, 'sixty', body)),
    )
    const ids = new Set<number>()
    for (const response of responses) {
      if (response.status === 409) {
        assert.equal(response.headers.get('retry-after'), '1')
        await response.body?.cancel()
        continue
      }
      assert.equal(response.status, 201)
      ids.add(((await response.json()) as Pet).id)
    }
    assert.equal(ids.size, 1, 'every 201 carries the same pet')
    const all = await walk(urls, key, '/v1/pets?limit=100')
    assert.equal(all.filter((p) => p.name === 'Sixty').length, 1, 'exactly one pet was made')
  })

  test('an instance killed mid-creates: retries on the others replay what it committed', async (t) => {
    const victim = services[0] as ServiceProcess
    const others = urls.slice(1)
    const CREATES = 200
    const bodies = Array.from({ length: CREATES }, (_, i) => ({ name: `kill ${i}`, categoryId: 1 }))
    // Every create to the victim at once; it is killed as soon as the first 201 arrives, so
    // that the rest are being committed and answered meanwhile.
    let firstAnswer: () => void = () => {}
    const answering = new Promise<void>((resolve) => {
      firstAnswer = resolve
    })
    const sent = bodies.map((body, i) =>
      create(victim.url, `kill-${i}`, body).then(
        async (response) => {
          if (response.status !== 201) return undefined
          firstAnswer()
          return (await response.json()) as Pet
        },
        () => undefined,
      ),
    )
    await answering
    victim.child.kill('SIGKILL')
    await victim.exited
    const answered = await Promise.all(sent)
    // Retry every create on the other instances with the same key, until a 201.
    let replayed = 0
    for (const [i, body] of bodies.entries()) {
      for (let attempt = 0; ; attempt++) {
        assert.ok(attempt < 50, `kill-${i} never got a 201`)
        const response = await create(others[i % others.length] as string, `kill-${i}`, body)
        if (response.status === 409) {
          await response.body?.cancel()
          await new Promise((resolve) => setTimeout(resolve, 1000))
          continue
        }
        assert.equal(response.status, 201)
        const pet = (await response.json()) as Pet
        if (response.headers.get('idempotent-replayed') === 'true') replayed++
        const first = answered[i]
        if (first !== undefined) assert.deepEqual(pet, first, 'a 201 that left is replayed')
        break
      }
    }
    // Every create that got its 201 before the kill is a replay; others may be too (committed,
    // their 201 lost with the process).
    const acknowledged = answered.filter((a) => a !== undefined).length
    assert.ok(acknowledged < CREATES, 'the kill caught creates in flight')
    assert.ok(replayed >= acknowledged)
    t.diagnostic(`201 before the kill ${acknowledged}, replays ${replayed} of ${CREATES}`)
    const all = await walk(others, key, '/v1/pets?limit=100')
    for (const body of bodies) {
      assert.equal(all.filter((p) => p.name === body.name).length, 1, `${body.name} once`)
    }
  })
})
