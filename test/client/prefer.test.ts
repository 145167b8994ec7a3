// The SDK's `prefer` call option (issue 49): sent as `Prefer` with every attempt of a call, so
// that a staging service (D29) rehearses the failures the SDK retries, 503 and 429, and the
// retries can be checked without an outage; production ignores it. Black-box against the real
// service; waits are recorded by an injected sleep, never slept.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Petstore, type PetstoreOptions } from '../../client/src/index.ts'
import { ManualClock, startServer, type TestServer } from '../helpers/server.ts'
import { petstoreError, rejection } from './rejections.ts'

/** What one attempt sent and what came back, seen by a fetch wrapped around the platform's. */
interface Exchange {
  prefer: string | null
  status: number
  applied: string | null
}

/** A client whose waits are recorded (and not slept) and whose attempts are recorded. */
function client(server: TestServer, options: Partial<PetstoreOptions> = {}) {
  const waits: number[] = []
  const exchanges: Exchange[] = []
  const petstore = new Petstore({
    baseUrl: `${server.url}/v1`,
    apiKey: server.key,
    fetch: async (url, init) => {
      const response = await fetch(url, init)
      exchanges.push({
        prefer: new Headers(init.headers).get('prefer'),
        status: response.status,
        applied: response.headers.get('preference-applied'),
      })
      return response
    },
    sleep: async (ms, signal) => {
      signal?.throwIfAborted()
      waits.push(ms)
    },
    // The highest draw: the backoff's jitter at its largest, still under Retry-After's floor.
    random: () => 0.99,
    ...options,
  })
  return { petstore, waits, exchanges }
}

describe('prefer against a staging service', () => {
  // Ten seconds into the rate limit's minute: a rehearsed 429's Retry-After is 50 s.
  const clock = new ManualClock(Date.UTC(2027, 0, 1, 12, 0, 10))
  let server: TestServer
  before(async () => {
    server = await startServer({ env: 'staging', rateLimit: 600, clock })
  })
  after(() => server.close())

  test('code=503: three attempts with maxRetries 2, each rehearsed, Retry-After waited between', async () => {
    const { petstore, waits, exchanges } = client(server, { maxRetries: 2 })
    const err = await petstoreError(petstore.pets.listPage({ limit: 1 }, { prefer: 'code=503' }))
    assert.equal(err.status, 503)
    assert.equal(err.code, 'unavailable')
    assert.equal(err.retryAfter, 1)
    assert.match(err.message, /^rehearsed with Prefer: code=503/)
    assert.match(err.requestId ?? '', /.+/)
    assert.deepEqual(
      exchanges,
      Array(3).fill({ prefer: 'code=503', status: 503, applied: 'code=503' }),
      'every attempt carried the Prefer and was answered by the rehearsal',
    )
    assert.deepEqual(waits, [1000, 1000], 'Retry-After: 1, over the backoff (below 1 s)')

    // create and get send it on every attempt too, and a rehearsed 503 makes no pet.
    const created = client(server, { maxRetries: 1 })
    const refused = await petstoreError(
      created.petstore.pets.create({ name: 'Never', categoryId: 1 }, { prefer: 'code=503' }),
    )
    assert.equal(refused.status, 503)
    assert.deepEqual(
      created.exchanges.map((exchange) => exchange.prefer),
      ['code=503', 'code=503'],
    )
    const page = await client(server).petstore.pets.listPage({ limit: 100 })
    assert.ok(!page.pets.some((pet) => pet.name === 'Never'))
  })

  test('code=429 within maxRetryDelayMs: three attempts, Retry-After (50 s) recorded, not slept', async () => {
    clock.set(Date.UTC(2027, 0, 1, 12, 0, 10))
    const { petstore, waits, exchanges } = client(server, {
      maxRetries: 2,
      maxRetryDelayMs: 60_000,
    })
    const err = await petstoreError(petstore.pets.listPage({}, { prefer: 'code=429' }))
    assert.equal(err.status, 429)
    assert.equal(err.code, 'rate_limited')
    assert.equal(err.retryAfter, 50)
    assert.deepEqual(err.rateLimit, { remaining: 0, reset: 50 })
    assert.deepEqual(
      exchanges,
      Array(3).fill({ prefer: 'code=429', status: 429, applied: 'code=429' }),
    )
    // The service's clock stands still: each answer says 50 s again.
    assert.deepEqual(waits, [50_000, 50_000])
  })

  test('code=429 past the default 30 s cap: not retried, the error says when', async () => {
    clock.set(Date.UTC(2027, 0, 1, 12, 0, 10))
    const { petstore, waits, exchanges } = client(server, { maxRetries: 2 })
    const err = await petstoreError(petstore.pets.listPage({}, { prefer: 'code=429' }))
    assert.equal(err.status, 429)
    assert.equal(err.retryAfter, 50)
    assert.equal(exchanges.length, 1, 'a retry before Retry-After would be refused again')
    assert.deepEqual(waits, [])

    // Forty-five seconds into the minute, Retry-After is 15 s, under the cap: retried.
    clock.set(Date.UTC(2027, 0, 1, 12, 0, 45))
    const sooner = client(server, { maxRetries: 2 })
    const again = await petstoreError(sooner.petstore.pets.listPage({}, { prefer: 'code=429' }))
    assert.equal(again.retryAfter, 15)
    assert.equal(sooner.exchanges.length, 3)
    assert.deepEqual(sooner.waits, [15_000, 15_000])
  })

  test('delay passes through: within timeoutMs the call succeeds, past it the attempt times out', async () => {
    const { petstore, waits, exchanges } = client(server)
    const page = await petstore.pets.listPage({ limit: 1 }, { prefer: 'delay=20' })
    assert.ok(Array.isArray(page.pets))
    assert.deepEqual(exchanges, [{ prefer: 'delay=20', status: 200, applied: 'delay=20' }])
    assert.deepEqual(waits, [])

    // A slow answer rehearsed: each attempt (50 ms allowed) meets a 150 ms delay.
    const slow = client(server, { timeoutMs: 50, maxRetries: 1 })
    const err = await petstoreError(slow.petstore.pets.listPage({}, { prefer: 'delay=150' }))
    assert.equal(err.status, 0)
    assert.equal(err.code, 'timeout')
    assert.equal(slow.waits.length, 1, 'one retry, then the timeout is the error')
  })
})

describe('prefer against a production service', () => {
  let server: TestServer
  before(async () => {
    server = await startServer({ env: 'production', rateLimit: 600 })
  })
  after(() => server.close())

  test('changes nothing: sent, ignored, one attempt, no Preference-Applied', async () => {
    // delay=10000 beside timeoutMs 2000: were it honoured, the call would time out.
    const { petstore, waits, exchanges } = client(server, { timeoutMs: 2000 })
    const long = `x=${'a'.repeat(510)}`
    for (const prefer of ['code=503', 'code=429', 'delay=10000', 'code=503,\tdelay=10000', long]) {
      const page = await petstore.pets.listPage({ limit: 1 }, { prefer })
      assert.ok(Array.isArray(page.pets), prefer)
    }
    const pet = await petstore.pets.create({ name: 'Real', categoryId: 1 }, { prefer: 'code=503' })
    assert.equal(pet.name, 'Real')
    assert.deepEqual(
      exchanges.map((exchange) => exchange.prefer),
      ['code=503', 'code=429', 'delay=10000', 'code=503,\tdelay=10000', long, 'code=503'],
    )
    assert.ok(exchanges.every((exchange) => exchange.applied === null && exchange.status < 300))
    assert.deepEqual(waits, [])
  })
})

test('an invalid prefer fails the call with a TypeError before anything is sent', async () => {
  const fetch: PetstoreOptions['fetch'] = () => assert.fail('nothing is sent')
  const petstore = new Petstore({ baseUrl: 'http://127.0.0.1:1/v1', apiKey: 'k', fetch })
  const invalid: unknown[] = [
    '',
    ' ',
    '\t \t',
    'code=503\r\nx-injected: 1',
    'code=503\n',
    'code=503\r',
    'code=503\0',
    'code=\x7f',
    'code=503; note="café"',
    'a'.repeat(513),
    503,
    null,
  ]
  const calls = (prefer: string) => [
    petstore.pets.listPage({}, { prefer }),
    petstore.pets.get(1, { prefer }),
    petstore.pets.create({ name: 'Rex', categoryId: 1 }, { prefer }),
    petstore.pets.list({}, { prefer }).next(),
  ]
  for (const prefer of invalid) {
    for (const call of calls(prefer as string)) {
      const err = await rejection(call)
      assert.ok(err instanceof TypeError, JSON.stringify(prefer))
      assert.match(
        err.message,
        /^Petstore: prefer must be 1 to 512 characters of visible ASCII, spaces and tabs, not only white space, and no CR or LF/,
      )
    }
  }
})
