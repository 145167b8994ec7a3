// D29: a staging deployment lets client developers rehearse failures: `Prefer: code=` and
// `delay=` (RFC 7240, Prism's spelling) and random faults (PETSTORE_STAGING_FAULTS); production
// ignores every Prefer. Black-box over HTTP, on the test engine.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { loggerOptions } from '../../src/observability/logging.ts'
import { parseFaults } from '../../src/staging/faults.ts'
import { memoryLog } from '../helpers/logs.ts'
import { parseExposition, sampleValue } from '../helpers/prometheus.ts'
import { createPet, errorOf, startServer, type TestServer } from '../helpers/server.ts'

const NEW_PET = { name: 'Rex', categoryId: 1, status: 'available' }

function prefer(value: string, init: RequestInit = {}): RequestInit {
  return { ...init, headers: { ...(init.headers as Record<string, string>), prefer: value } }
}

async function petCount(server: TestServer): Promise<number> {
  const response = await server.request('/v1/pets?limit=100')
  return ((await response.json()) as unknown[]).length
}

describe('Prefer on a staging instance (D29)', () => {
  let server: TestServer
  let petId: number
  before(async () => {
    server = await startServer({ env: 'staging', rateLimit: 600 })
    const created = await createPet(server, NEW_PET)
    petId = ((await created.json()) as { id: number }).id
  })
  after(() => server.close())

  test('code=429: the rate limit answer, with Retry-After, the budget spent and Preference-Applied', async () => {
    const response = await server.request('/v1/pets', prefer('code=429'))
    assert.equal(response.status, 429)
    assert.equal(response.headers.get('preference-applied'), 'code=429')
    const retryAfter = Number(response.headers.get('retry-after'))
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `${retryAfter}`)
    assert.equal(response.headers.get('ratelimit'), `"default";r=0;t=${retryAfter}`)
    assert.equal(response.headers.get('ratelimit-policy'), '"default";q=600;w=60')
    assert.match(response.headers.get('x-request-id') ?? '', /./)
    assert.equal(response.headers.get('cache-control'), 'no-store')
    const body = await errorOf(response)
    assert.equal(body.code, 'rate_limited')
    assert.equal(body.status, 429)
    assert.match(body.message, /rehearsed with Prefer: code=429/)
  })

  test('code=503 on createPet: 503 with Retry-After 1, and no pet is made', async () => {
    const before = await petCount(server)
    const response = await createPet(server, NEW_PET, prefer('code=503'))
    assert.equal(response.status, 503)
    assert.equal(response.headers.get('retry-after'), '1')
    assert.equal(response.headers.get('preference-applied'), 'code=503')
    assert.equal((await errorOf(response)).code, 'unavailable')
    assert.equal(await petCount(server), before)
  })

  test("each operation's documented errors, as they come for real", async () => {
    const cases: [string, RequestInit, number, string][] = [
      [`/v1/pets/${petId}`, {}, 404, 'not_found'],
      [`/v1/pets/${petId}`, {}, 410, 'gone'],
      [
        '/v1/pets',
        { method: 'POST', body: JSON.stringify(NEW_PET) },
        409,
        'idempotency_key_in_use',
      ],
      [
        '/v1/pets',
        { method: 'POST', body: JSON.stringify(NEW_PET) },
        422,
        'idempotency_key_reused',
      ],
      [
        '/v1/pets',
        { method: 'POST', body: JSON.stringify(NEW_PET) },
        415,
        'unsupported_media_type',
      ],
      ['/v1/pets', {}, 400, 'invalid_request'],
      ['/v1/pets', {}, 500, 'internal_error'],
    ]
    for (const [path, init, status, code] of cases) {
      const headers = { 'content-type': 'application/json', prefer: `code=${status}` }
      const response = await server.request(path, { ...init, headers })
      assert.equal(response.status, status, `${path} code=${status}`)
      assert.equal((await errorOf(response)).code, code)
      assert.equal(response.headers.get('preference-applied'), `code=${status}`)
      if (path.startsWith('/v1/pets/')) assert.ok(response.headers.get('deprecation'))
      if (status === 409) assert.equal(response.headers.get('retry-after'), '1')
    }
  })

  test('code=401 after a valid key: the challenge, and no budget fields, as a real 401', async () => {
    const response = await server.request('/v1/pets', prefer('code=401'))
    assert.equal(response.status, 401)
    assert.equal(
      response.headers.get('www-authenticate'),
      'Bearer realm="petstore", error="invalid_token"',
    )
    assert.equal(response.headers.get('ratelimit'), null)
    assert.equal(response.headers.get('ratelimit-policy'), null)
  })

  test('a status the operation does not document is a 400 naming those it does', async () => {
    for (const value of ['code=404', 'code=abc', 'code=']) {
      const response = await server.request('/v1/pets', prefer(value))
      assert.equal(response.status, 400, value)
      const body = await errorOf(response)
      assert.match(
        body.message,
        /Prefer: code must be a status this operation documents: 200, 400, 401, 429, 500, 503/,
      )
      assert.equal(response.headers.get('preference-applied'), null)
    }
  })

  test('a value quoted back in the 400 is cut short, however long the field', async () => {
    const response = await server.request('/v1/pets', prefer(`code=${'9'.repeat(8_000)}`))
    assert.equal(response.status, 400)
    const { message } = await errorOf(response)
    assert.ok(message.length < 200, `${message.length} characters`)
    assert.match(message, /\(got "9{40}…"\)$/)
  })

  test('authentication comes first: no key and Prefer: code=503 is a 401', async () => {
    const response = await fetch(`${server.url}/v1/pets`, prefer('code=503'))
    assert.equal(response.status, 401)
    assert.equal(response.headers.get('preference-applied'), null)
  })

  test('delay=300 holds a real answer at least 300 ms; past 10,000 ms is a 400', async () => {
    const started = performance.now()
    const response = await server.request('/v1/pets?limit=1', prefer('delay=300'))
    const elapsed = performance.now() - started
    assert.equal(response.status, 200)
    assert.ok(elapsed >= 300, `answered after ${elapsed} ms`)
    assert.equal(response.headers.get('preference-applied'), 'delay=300')
    const tooLong = await server.request('/v1/pets', prefer('delay=10001'))
    assert.equal(tooLong.status, 400)
    assert.match(
      (await errorOf(tooLong)).message,
      /delay must be whole milliseconds from 0 to 10000/,
    )
  })

  test('code and delay together; RFC 7240 syntax: parameters, quotes, other preferences, first wins', async () => {
    const started = performance.now()
    const both = await server.request(
      '/v1/pets',
      prefer('respond-async, code="503"; x=1, delay=50, code=429'),
    )
    assert.ok(performance.now() - started >= 50)
    assert.equal(both.status, 503)
    assert.equal(both.headers.get('preference-applied'), 'code=503, delay=50')
    const other = await server.request('/v1/pets?limit=1', prefer('return=minimal'))
    assert.equal(other.status, 200)
    assert.equal(other.headers.get('preference-applied'), null)
  })

  test("the operation's success status is served for real, and said applied only when it comes", async () => {
    const made = await createPet(server, NEW_PET, prefer('code=201'))
    assert.equal(made.status, 201)
    assert.equal(made.headers.get('preference-applied'), 'code=201')
    const refused = await createPet(server, { name: '' }, prefer('code=201'))
    assert.equal(refused.status, 400)
    assert.equal(refused.headers.get('preference-applied'), null)
  })
})

describe('Prefer on a production instance (D29)', () => {
  let server: TestServer
  before(async () => {
    server = await startServer({ env: 'production', rateLimit: 600 })
  })
  after(() => server.close())

  test('every Prefer is ignored: the answer is as if it were absent, with no Preference-Applied', async () => {
    for (const value of [
      'code=429',
      'code=503',
      'code=404',
      'delay=300',
      'code=401, delay=10001',
    ]) {
      const response = await server.request('/v1/pets?limit=1', prefer(value))
      assert.equal(response.status, 200, value)
      assert.equal(response.headers.get('preference-applied'), null)
      assert.equal(response.headers.get('petstore-staging-fault'), null)
    }
    const created = await createPet(server, NEW_PET, prefer('code=503'))
    assert.equal(created.status, 201)
  })
})

describe('random faults on a staging instance (D29)', () => {
  const REQUESTS = 2_000
  const RATES = { 503: 0.05, 429: 0.02, delay: 0.1 }
  let server: TestServer
  const log = memoryLog()
  before(async () => {
    server = await startServer({
      env: 'staging',
      rateLimit: 1_000_000,
      metrics: true,
      stagingFaults: parseFaults(`503:${RATES[503]},429:${RATES[429]},delay:1ms:${RATES.delay}`),
      logger: { ...loggerOptions({ logLevel: 'info' }), stream: log.stream },
    })
  })
  after(() => server.close())

  test('2,000 requests meet each fault at its rate, each marked in a header, the log and the metrics', async (t) => {
    const seen = { 503: 0, 429: 0, delay: 0, other: 0 }
    for (let i = 0; i < REQUESTS; i++) {
      const response = await server.request('/v1/pets?limit=1')
      await response.arrayBuffer()
      const mark = response.headers.get('petstore-staging-fault') ?? ''
      if (mark.includes('delay=1')) seen.delay++
      if (response.status === 503) {
        seen[503]++
        assert.match(mark, /code=503/)
        assert.equal(response.headers.get('retry-after'), '1')
      } else if (response.status === 429) {
        seen[429]++
        assert.match(mark, /code=429/)
        assert.ok(response.headers.get('retry-after'))
      } else {
        assert.equal(response.status, 200)
        assert.doesNotMatch(mark, /code=/)
        if (mark === '') seen.other++
      }
    }
    // Binomial(2,000, p): each count within 5 standard deviations of its mean (a false alarm
    // about once in 1.7 million runs a count).
    for (const kind of [503, 429, 'delay'] as const) {
      const p = RATES[kind]
      const mean = REQUESTS * p
      const sd = Math.sqrt(REQUESTS * p * (1 - p))
      assert.ok(
        Math.abs(seen[kind] - mean) <= 5 * sd,
        `${kind}: ${seen[kind]} of ${REQUESTS}, expected about ${mean}`,
      )
    }
    t.diagnostic(`of ${REQUESTS}: ${seen[503]} 503, ${seen[429]} 429, ${seen.delay} delayed`)
    const lines = log.lines().filter((line) => line.msg === 'request completed')
    const marked = (pattern: RegExp) =>
      lines.filter((line) => typeof line.staging === 'string' && pattern.test(line.staging)).length
    assert.equal(marked(/^fault .*code=503/), seen[503])
    assert.equal(marked(/^fault .*code=429/), seen[429])
    assert.equal(marked(/^fault .*delay=1/), seen.delay)
    const families = parseExposition(await (await fetch(server.metricsUrl ?? '')).text())
    const counted = (answer: string) =>
      sampleValue(families, 'petstore_rehearsed_answers_total', { kind: 'fault', answer })
    assert.equal(counted('503'), seen[503])
    assert.equal(counted('429'), seen[429])
    assert.equal(counted('delay'), seen.delay)
  })

  test('a request with a Prefer the instance honours meets no random fault', async () => {
    for (let i = 0; i < 200; i++) {
      const response = await server.request('/v1/pets?limit=1', prefer('code=200'))
      await response.arrayBuffer()
      assert.equal(response.status, 200)
      assert.equal(response.headers.get('petstore-staging-fault'), null)
      assert.equal(response.headers.get('preference-applied'), 'code=200')
    }
  })
})
