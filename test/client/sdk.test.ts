// The client SDK (D18) against the real service listening on a port: paging, retries that
// never duplicate a create, Retry-After, errors, a gateway's HTML and cancellation.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { type Pet, Petstore, type PetstoreOptions } from '../../client/src/index.ts'
import { type Store, StoreUnavailableError } from '../../src/store/store.ts'
import { type Fault, startHttpFaultProxy } from '../helpers/http-fault-proxy.ts'
import {
  ManualClock,
  openTestStore,
  startServer,
  type TestServer,
  type TestStore,
} from '../helpers/server.ts'
import { petstoreError, rejection } from './rejections.ts'

/** An injected sleep: records each wait asked for and returns at once (no wall-clock waits). */
function recordingSleep(onSleep: (ms: number) => void = () => {}) {
  const waits: number[] = []
  const sleep = async (ms: number, signal?: AbortSignal) => {
    signal?.throwIfAborted()
    waits.push(ms)
    onSleep(ms)
  }
  return { waits, sleep }
}

/** A fetch that counts what it sends, around the platform's. */
function countingFetch() {
  const sent: string[] = []
  const fetcher = (url: string, init: RequestInit) => {
    sent.push(`${init.method} ${new URL(url).pathname}${new URL(url).search}`)
    return fetch(url, init)
  }
  return { sent, fetch: fetcher }
}

function client(url: string, key: string, options: Partial<PetstoreOptions> = {}): Petstore {
  return new Petstore({ baseUrl: `${url}/v1`, apiKey: key, ...options })
}

describe('the client against the service', () => {
  let server: TestServer
  let petstore: Petstore

  before(async () => {
    server = await startServer()
    petstore = client(server.url, server.key)
  })
  after(() => server.close())

  test('list pages through a filtered set of more than three pages, each pet once', async () => {
    const statuses = ['available', 'sold', 'available', 'pending'] as const
    const made: Pet[] = []
    for (let i = 0; i < 48; i++) {
      made.push(
        await petstore.pets.create({ name: `Pager ${i}`, categoryId: 7, status: statuses[i % 4] }),
      )
    }
    const expected = made.filter((pet) => pet.status === 'available').map((pet) => pet.id)
    assert.equal(expected.length, 24)

    const { sent, fetch } = countingFetch()
    const counted = client(server.url, server.key, { fetch })
    const seen: number[] = []
    for await (const pet of counted.pets.list({ status: 'available', limit: 5 })) {
      assert.equal(pet.status, 'available')
      seen.push(pet.id)
    }
    assert.deepEqual(seen, expected)
    assert.equal(sent.length, 5, 'five pages of five, the last one short')

    // listPage hands out the cursor instead of following it.
    const paged: number[] = []
    let cursor: string | undefined
    let pages = 0
    do {
      const page = await petstore.pets.listPage({ status: 'available', limit: 5, cursor })
      paged.push(...page.pets.map((pet) => pet.id))
      cursor = page.nextCursor
      pages++
    } while (cursor !== undefined)
    assert.deepEqual(paged, expected)
    assert.equal(pages, 5)
  })

  test('create sends a new Idempotency-Key each call, or the one given', async () => {
    const { sent, fetch } = countingFetch()
    const keys: (string | null)[] = []
    const keyed = client(server.url, server.key, {
      fetch: (url, init) => {
        keys.push(new Headers(init.headers).get('idempotency-key'))
        return fetch(url, init)
      },
    })
    const first = await keyed.pets.create({ name: 'Keyed', categoryId: 1 })
    const second = await keyed.pets.create({ name: 'Keyed', categoryId: 1 })
    assert.notEqual(first.id, second.id)
    const given = await keyed.pets.create(
      { name: 'Given', categoryId: 1 },
      { idempotencyKey: 'order-42' },
    )
    const again = await keyed.pets.create(
      { name: 'Given', categoryId: 1 },
      { idempotencyKey: 'order-42' },
    )
    assert.equal(again.id, given.id, 'the same key replays the first create')
    assert.equal(sent.length, 4)
    assert.match(keys[0] ?? '', /^[0-9a-f-]{36}$/)
    assert.notEqual(keys[0], keys[1])
    assert.deepEqual(keys.slice(2), ['order-42', 'order-42'])
  })

  test('errors carry status, code, message and the request id, and are not retried', async () => {
    const { sent, fetch } = countingFetch()
    const counted = client(server.url, server.key, { fetch })
    const missing = await petstoreError(counted.pets.get(999_999))
    assert.equal(missing.status, 404)
    assert.equal(missing.code, 'not_found')
    assert.match(missing.message, /999999/)
    assert.match(missing.requestId ?? '', /.+/)
    assert.equal(missing.rateLimit, undefined, 'no RateLimit field when the limit is off')

    const invalid = await petstoreError(counted.pets.create({ name: '', categoryId: 1 }))
    assert.equal(invalid.status, 400)
    assert.equal(invalid.code, 'invalid_request')
    assert.match(invalid.message, /name/)
    assert.equal(sent.length, 2, 'a 404 and a 400 are not retried')

    const stranger = client(server.url, 'petstore_live_notakeynotakeynotakeynotakey000000')
    const refused = await petstoreError(stranger.pets.listPage())
    assert.equal(refused.status, 401)
    assert.equal(refused.code, 'unauthorized')
    assert.match(refused.requestId ?? '', /.+/)
  })

  test('get works and is the deprecated operation', async () => {
    const made = await petstore.pets.create({ name: 'Old', categoryId: 3, status: 'sold' })
    assert.deepEqual(await petstore.pets.get(made.id), made)
  })
})

describe('retries through a proxy', () => {
  let server: TestServer
  before(async () => {
    server = await startServer()
  })
  after(() => server.close())

  async function proxied(decide: (seen: number) => Fault, options: Partial<PetstoreOptions> = {}) {
    const proxy = await startHttpFaultProxy(server.url, (_request, seen) => decide(seen))
    const { waits, sleep } = recordingSleep()
    return { proxy, waits, petstore: client(proxy.url, server.key, { sleep, ...options }) }
  }

  test('a create whose answer was lost after the commit is retried and makes one pet', async () => {
    const { proxy, waits, petstore } = await proxied((seen) =>
      seen === 0 ? 'drop-answer' : 'forward',
    )
    try {
      const pet = await petstore.pets.create({ name: 'Once', categoryId: 11 })
      assert.equal(pet.name, 'Once')
      const [first, second] = proxy.requests
      assert.equal(proxy.requests.length, 2)
      assert.equal(first?.upstream?.status, 201, 'the service committed the first attempt')
      assert.equal(second?.headers['idempotency-key'], first?.headers['idempotency-key'])
      assert.equal(second?.upstream?.headers['idempotent-replayed'], 'true')
      assert.equal(waits.length, 1)
      const named: Pet[] = []
      for await (const p of client(server.url, server.key).pets.list()) {
        if (p.name === 'Once') named.push(p)
      }
      assert.deepEqual(named, [pet])
    } finally {
      await proxy.close()
    }
  })

  test("a gateway's HTML 502 is a PetstoreError with the status, not retried", async () => {
    const { proxy, waits, petstore } = await proxied(() => 'html-502')
    try {
      const err = await petstoreError(petstore.pets.listPage())
      assert.equal(err.status, 502)
      assert.equal(err.code, 'invalid_response')
      assert.match(err.message, /HTTP 502/)
      assert.match(err.message, /text\/html/)
      assert.equal(proxy.requests.length, 1)
      assert.deepEqual(waits, [])
    } finally {
      await proxy.close()
    }
  })

  test('a next link to another host is not followed: the API key would go with it', async () => {
    await client(server.url, server.key).pets.create({ name: 'Linked', categoryId: 1 })
    const { proxy, petstore } = await proxied(() => 'foreign-link')
    try {
      const seen: Pet[] = []
      const err = await petstoreError(
        (async () => {
          for await (const pet of petstore.pets.list({ limit: 1 })) seen.push(pet)
        })(),
      )
      assert.equal(err.code, 'invalid_response')
      assert.match(err.message, /not under http:\/\/127\.0\.0\.1:\d+\/v1\//)
      assert.equal(seen.length, 1, 'the first page was yielded')
      assert.equal(proxy.requests.length, 1)
    } finally {
      await proxy.close()
    }
  })

  test('an attempt past timeoutMs is retried', async () => {
    const { proxy, waits, petstore } = await proxied((seen) => (seen === 0 ? 'hold' : 'forward'), {
      timeoutMs: 200,
    })
    try {
      const page = await petstore.pets.listPage({ limit: 1 })
      assert.ok(Array.isArray(page.pets))
      assert.equal(proxy.requests.length, 2)
      assert.equal(waits.length, 1)
    } finally {
      await proxy.close()
    }
  })

  test('timeouts on every attempt end in a PetstoreError timeout, status 0', async () => {
    const { proxy, waits, petstore } = await proxied(() => 'hold', {
      timeoutMs: 100,
      maxRetries: 1,
    })
    try {
      const err = await petstoreError(petstore.pets.listPage())
      assert.equal(err.status, 0)
      assert.equal(err.code, 'timeout')
      assert.equal(err.requestId, undefined)
      assert.equal(proxy.requests.length, 2)
      assert.equal(waits.length, 1)
    } finally {
      await proxy.close()
    }
  })

  test('AbortSignal cancels a request in flight, without a retry', async () => {
    const { proxy, waits, petstore } = await proxied(() => 'hold')
    try {
      const controller = new AbortController()
      const call = petstore.pets.create(
        { name: 'Never', categoryId: 1 },
        { signal: controller.signal },
      )
      while (proxy.requests.length === 0) await new Promise((resolve) => setImmediate(resolve))
      controller.abort()
      const err = await rejection(call)
      assert.ok(err instanceof Error)
      assert.equal(err.name, 'AbortError')
      assert.equal(proxy.requests.length, 1)
      assert.deepEqual(waits, [])
    } finally {
      await proxy.close()
    }
  })
})

test('a refused connection ends in a PetstoreError network_error, status 0, after the retries', async () => {
  const server = await startServer()
  const url = server.url
  await server.close()
  const { waits, sleep } = recordingSleep()
  const petstore = client(url, server.key, { sleep, maxRetries: 3 })
  const err = await petstoreError(petstore.pets.listPage())
  assert.equal(err.status, 0)
  assert.equal(err.code, 'network_error')
  assert.equal(waits.length, 3)
})

describe('429: Retry-After from the rate limit', () => {
  const clock = new ManualClock(Date.UTC(2027, 0, 1, 12, 0, 10))
  let server: TestServer
  before(async () => {
    server = await startServer({ rateLimit: 2, clock })
  })
  after(() => server.close())

  test('waits at least Retry-After (moving the service clock), then succeeds', async () => {
    // Ten seconds into a one-minute window: Retry-After is 50 once the budget of 2 is spent.
    clock.set(Date.UTC(2027, 0, 1, 12, 0, 10))
    const { waits, sleep } = recordingSleep((ms) => clock.advance(ms))
    const petstore = client(server.url, server.key, {
      sleep,
      maxRetryDelayMs: 60_000,
      random: () => 0.5,
    })
    await petstore.pets.listPage()
    await petstore.pets.listPage()
    const page = await petstore.pets.listPage()
    assert.ok(Array.isArray(page.pets))
    assert.deepEqual(waits, [50_000])
  })

  test('a Retry-After over the cap is not waited for: the error says when', async () => {
    clock.set(Date.UTC(2027, 0, 1, 12, 2, 10))
    const { waits, sleep } = recordingSleep()
    const petstore = client(server.url, server.key, { sleep })
    await petstore.pets.listPage()
    await petstore.pets.listPage()
    const err = await petstoreError(petstore.pets.listPage())
    assert.equal(err.status, 429)
    assert.equal(err.code, 'rate_limited')
    assert.equal(err.retryAfter, 50)
    assert.deepEqual(err.rateLimit, { remaining: 0, reset: 50 })
    assert.match(err.requestId ?? '', /.+/)
    assert.deepEqual(waits, [], 'the default cap is 30 s')
  })
})

describe('503: Retry-After from an unreachable database', () => {
  let database: TestStore
  let server: TestServer
  /** How many list calls the database still fails. */
  let failing = 0

  before(async () => {
    database = await openTestStore()
    const real = database.store
    await real.migrate()
    // The real store, unreachable for the next `failing` list calls: an outage that heals.
    const store: Store = {
      apiKeys: real.apiKeys,
      staging: real.staging,
      environment: real.environment,
      migrate: (environment) => real.migrate(environment),
      schema: () => real.schema(),
      close: () => real.close(),
      ping: () => real.ping(),
      reportOutagesTo: () => {},
      observe: () => {},
      pets: {
        create: (...args) => real.pets.create(...args),
        createIdempotent: (...args) => real.pets.createIdempotent(...args),
        purgeIdempotencyRecords: (...args) => real.pets.purgeIdempotencyRecords(...args),
        get: (...args) => real.pets.get(...args),
        list: (...args) => {
          if (failing === 0) return real.pets.list(...args)
          failing--
          return Promise.reject(new StoreUnavailableError('connect ECONNREFUSED 10.0.0.9:5432'))
        },
      },
    }
    server = await startServer({ store })
  })
  after(async () => {
    await server.close()
    await database.close()
  })

  test('waits at least Retry-After: 1 before each retry, then succeeds', async () => {
    failing = 2
    const { waits, sleep } = recordingSleep()
    // random → 0.99: the backoff (below 500 ms, then 1 s) stays under the 1 s Retry-After.
    const petstore = client(server.url, server.key, { sleep, random: () => 0.99 })
    const page = await petstore.pets.listPage()
    assert.ok(Array.isArray(page.pets))
    assert.deepEqual(waits, [1000, 1000])
  })

  test('past maxRetries the 503 is the error, with its Retry-After', async () => {
    failing = 3
    const { waits, sleep } = recordingSleep()
    const petstore = client(server.url, server.key, { sleep })
    const err = await petstoreError(petstore.pets.listPage())
    assert.equal(err.status, 503)
    assert.equal(err.code, 'unavailable')
    assert.equal(err.retryAfter, 1)
    assert.equal(waits.length, 2)
    failing = 0
  })

  test('AbortSignal cancels the wait before a retry', async () => {
    failing = 1_000
    const controller = new AbortController()
    let answers = 0
    // The real sleep: if the abort did not end the 1 s wait, a second request would follow.
    const petstore = client(server.url, server.key, {
      fetch: async (url, init) => {
        const response = await fetch(url, init)
        answers++
        setImmediate(() => controller.abort())
        return response
      },
    })
    const err = await rejection(petstore.pets.listPage({}, { signal: controller.signal }))
    assert.ok(err instanceof Error)
    assert.equal(err.name, 'AbortError')
    assert.equal(answers, 1)
    failing = 0
  })
})

test('the constructor refuses a missing API key and a base address without /v1', () => {
  assert.throws(() => new Petstore({ baseUrl: 'http://127.0.0.1:1/v1', apiKey: undefined }), {
    name: 'TypeError',
    message: /apiKey is missing/,
  })
  assert.throws(() => new Petstore({ baseUrl: 'http://127.0.0.1:1', apiKey: 'k' }), {
    name: 'TypeError',
    message: /ending in \/v1/,
  })
  assert.throws(
    () => new Petstore({ baseUrl: 'http://127.0.0.1:1/v1/', apiKey: 'k', maxRetries: -1 }),
    /maxRetries/,
  )
})

test('the constructor refuses plain http to another machine unless allowInsecureHttp says so', () => {
  // No fetch is ever called: the key is refused before anything is sent.
  const fetch: PetstoreOptions['fetch'] = () => assert.fail('nothing is sent')
  const make = (baseUrl: string, options: Partial<PetstoreOptions> = {}) =>
    new Petstore({ baseUrl, apiKey: 'k', fetch, ...options })
  for (const baseUrl of [
    'http://example.com/v1',
    'http://example.com:8080/v1/',
    'http://10.0.0.5/v1',
    'http://api.localhost/v1',
    'http://[::2]/v1',
  ]) {
    assert.throws(() => make(baseUrl), {
      name: 'TypeError',
      message:
        /^Petstore: baseUrl is plain http to .+, which is not this machine .*: the API key would cross the network unencrypted.*; use https, or pass allowInsecureHttp: true/,
    })
    assert.throws(() => make(baseUrl, { allowInsecureHttp: false }), /allowInsecureHttp: true/)
  }
  assert.throws(() => make('http://example.com:8080/v1'), /plain http to example\.com:8080,/)

  assert.ok(make('http://example.com/v1', { allowInsecureHttp: true }) instanceof Petstore)
  for (const baseUrl of [
    'https://example.com/v1',
    'http://127.0.0.1/v1',
    'http://127.1.2.3:8080/v1',
    'http://localhost/v1',
    'http://LOCALHOST:8080/v1/',
    'http://[::1]/v1',
    'http://[::1]:8080/v1',
  ]) {
    assert.ok(make(baseUrl) instanceof Petstore, baseUrl)
  }
})

test('a traceparent and its tracestate go with every attempt of a call', async () => {
  const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
  const sent: Headers[] = []
  const fetch: PetstoreOptions['fetch'] = async (_url, init) => {
    sent.push(new Headers(init.headers))
    if (sent.length === 1) {
      return new Response(JSON.stringify({ code: 'unavailable', message: 'try again' }), {
        status: 503,
        headers: { 'content-type': 'application/json', 'retry-after': '0' },
      })
    }
    return new Response(JSON.stringify({ id: 7, name: 'Rex', categoryId: 1 }), {
      status: 200,
      headers: { 'content-type': 'application/json' },
    })
  }
  const { sleep } = recordingSleep()
  const petstore = new Petstore({ baseUrl: 'http://127.0.0.1:1/v1', apiKey: 'k', fetch, sleep })
  const pet = await petstore.pets.get(7, { traceparent, tracestate: 'vendor=abc' })
  assert.equal(pet.id, 7)
  assert.equal(sent.length, 2, 'the 503 was retried')
  for (const headers of sent) {
    assert.equal(headers.get('traceparent'), traceparent)
    assert.equal(headers.get('tracestate'), 'vendor=abc')
  }
  await petstore.pets.get(7)
  assert.equal(sent.at(-1)?.get('traceparent'), null, 'none unless given')
})

test('a malformed traceparent, or a tracestate alone, fails the call before anything is sent', async () => {
  const fetch: PetstoreOptions['fetch'] = () => assert.fail('nothing is sent')
  const petstore = new Petstore({ baseUrl: 'http://127.0.0.1:1/v1', apiKey: 'k', fetch })
  for (const traceparent of [
    'nonsense',
    '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01',
    '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
    '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
    '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
  ]) {
    const err = await rejection(petstore.pets.get(1, { traceparent }))
    assert.ok(err instanceof TypeError, traceparent)
    assert.match(err.message, /traceparent must be 00-/)
  }
  const alone = await rejection(
    petstore.pets.create({ name: 'Rex', categoryId: 1 }, { tracestate: 'a=b' }),
  )
  assert.ok(alone instanceof TypeError)
  assert.match(alone.message, /tracestate is sent only with a traceparent/)
})
