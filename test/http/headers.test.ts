// D8: X-Request-Id on every response. D13: security headers on every response, no-store on the
// API, CORS off unless origins are configured.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { EXPOSED_HEADERS } from '../../src/http/plugins/security.ts'
import { createPet, startServer, type TestServer } from '../helpers/server.ts'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** One request for each kind of response the service gives. */
function responseKinds(server: TestServer): Record<string, () => Promise<Response>> {
  return {
    '200 listPets': () => server.request('/v1/pets'),
    '201 createPet': () => createPet(server, { name: 'Headers', categoryId: 1 }),
    '400 invalid limit': () => server.request('/v1/pets?limit=0'),
    '400 invalid body': () => createPet(server, { name: '' }),
    '401 no key': () => fetch(`${server.url}/v1/pets`),
    '404 no such pet': () => server.request('/v1/pets/987654321'),
    '404 no such route': () => server.request('/v1/orders'),
    '405 wrong method': () => server.request('/v1/pets', { method: 'DELETE' }),
    '200 healthz': () => fetch(`${server.url}/healthz`),
    '200 root': () => fetch(`${server.url}/`),
    '200 readyz': () => fetch(`${server.url}/readyz`),
    '200 openapi.json': () => fetch(`${server.url}/v1/openapi.json`),
  }
}

describe('headers (D8, D13)', () => {
  let server: TestServer

  before(async () => {
    server = await startServer()
  })
  after(() => server.close())

  describe('X-Request-Id (D8)', () => {
    it('is on every kind of response, and differs between requests', async () => {
      const seen = new Set<string>()
      for (const [kind, send] of Object.entries(responseKinds(server))) {
        const response = await send()
        const id = response.headers.get('x-request-id')
        assert.ok(id, `${kind} has no X-Request-Id`)
        assert.match(id, UUID, kind)
        assert.ok(!seen.has(id), `${kind} repeats ${id}`)
        seen.add(id)
        await response.body?.cancel()
      }
    })

    it('echoes a well-formed client value on every kind of response', async () => {
      const given = 'abc-123.XYZ:7_'
      const sends: [string, RequestInit, string][] = [
        ['/v1/pets', {}, '200'],
        ['/v1/pets?limit=0', {}, '400'],
        ['/v1/pets', { headers: { authorization: 'Bearer nope' } }, '401'],
        ['/v1/pets/987654321', {}, '404'],
        ['/v1/nope', {}, '404 route'],
        ['/v1/pets', { method: 'PUT' }, '405'],
        ['/healthz', {}, 'healthz'],
      ]
      for (const [path, init, kind] of sends) {
        const headers = new Headers(init.headers)
        headers.set('x-request-id', given)
        const response = await server.request(path, { ...init, headers })
        assert.equal(response.headers.get('x-request-id'), given, kind)
        await response.body?.cancel()
      }
    })

    it('echoes a value of exactly 128 characters', async () => {
      const given = `${'a'.repeat(127)}Z`
      const response = await server.request('/v1/pets', { headers: { 'x-request-id': given } })
      assert.equal(response.headers.get('x-request-id'), given)
      await response.body?.cancel()
    })

    for (const [what, given] of [
      ['too long (129 characters)', 'a'.repeat(129)],
      ['with a space', 'abc def'],
      ['non-ASCII', 'abcé123'],
      ['with a slash', '../etc/passwd'],
      ['with a quote and angle brackets', '"<script>"'],
    ] as const) {
      it(`replaces an ill-formed client value: ${what}`, async () => {
        const response = await server.request('/v1/pets', {
          headers: { 'x-request-id': given },
        })
        const id = response.headers.get('x-request-id') ?? ''
        assert.notEqual(id, given)
        assert.match(id, UUID)
        await response.body?.cancel()
      })
    }
  })

  describe('security headers (D13)', () => {
    it('are on every kind of response: OWASP REST Security Cheat Sheet set', async () => {
      for (const [kind, send] of Object.entries(responseKinds(server))) {
        const response = await send()
        const h = response.headers
        assert.equal(h.get('x-content-type-options'), 'nosniff', kind)
        // A JSON answer is no page: it may load nothing and be framed nowhere.
        assert.equal(
          h.get('content-security-policy'),
          "default-src 'none'; frame-ancestors 'none'",
          kind,
        )
        assert.equal(h.get('x-frame-options'), 'DENY', kind)
        assert.match(h.get('strict-transport-security') ?? '', /max-age=\d+/, kind)
        assert.equal(h.get('referrer-policy'), 'no-referrer', kind)
        assert.equal(h.get('x-powered-by'), null, kind)
        // Helmet's page-only headers stay on /docs.
        assert.equal(h.get('cross-origin-opener-policy'), null, kind)
        await response.body?.cancel()
      }
    })

    it("the /docs page keeps helmet's HTML set, with its own CSP", async () => {
      const response = await fetch(`${server.url}/docs`)
      assert.equal(response.status, 200)
      const h = response.headers
      assert.equal(h.get('x-content-type-options'), 'nosniff')
      assert.equal(h.get('cross-origin-opener-policy'), 'same-origin')
      assert.equal(h.get('cross-origin-resource-policy'), 'same-origin')
      assert.equal(h.get('referrer-policy'), 'no-referrer')
      assert.match(h.get('strict-transport-security') ?? '', /max-age=\d+/)
      assert.match(h.get('content-security-policy') ?? '', /script-src 'self'/)
      assert.match(h.get('content-security-policy') ?? '', /frame-ancestors 'self'/)
      await response.body?.cancel()
    })

    it('API responses carry Cache-Control: no-store, errors included', async () => {
      const kinds = responseKinds(server)
      for (const kind of [
        '200 listPets',
        '201 createPet',
        '400 invalid limit',
        '400 invalid body',
        '401 no key',
        '404 no such pet',
      ]) {
        const send = kinds[kind]
        assert.ok(send)
        const response = await send()
        assert.equal(response.headers.get('cache-control'), 'no-store', kind)
        await response.body?.cancel()
      }
    })
  })

  describe('CORS off by default', () => {
    it('sends no Access-Control-* headers even when Origin is sent', async () => {
      const origin = { origin: 'https://app.example.com' }
      const get = await server.request('/v1/pets', { headers: origin })
      assert.equal(get.status, 200)
      assert.equal(get.headers.get('access-control-allow-origin'), null)
      assert.equal(get.headers.get('access-control-expose-headers'), null)
      await get.body?.cancel()

      const preflight = await fetch(`${server.url}/v1/pets`, {
        method: 'OPTIONS',
        headers: {
          ...origin,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'authorization, content-type',
        },
      })
      assert.notEqual(preflight.status, 204)
      assert.ok(preflight.status >= 400)
      assert.equal(preflight.headers.get('access-control-allow-origin'), null)
      assert.equal(preflight.headers.get('access-control-allow-headers'), null)
      await preflight.body?.cancel()
    })
  })
})

describe('CORS with a configured origin (D13)', () => {
  const allowed = 'https://app.example.com'
  let server: TestServer

  before(async () => {
    server = await startServer({ corsOrigins: [allowed] })
  })
  after(() => server.close())

  it('answers a preflight from the origin with 204, allowing Authorization', async () => {
    for (const [path, method] of [
      ['/v1/pets', 'GET'],
      ['/v1/pets', 'POST'],
      ['/v1/pets/1', 'GET'],
    ] as const) {
      const response = await fetch(server.url + path, {
        method: 'OPTIONS',
        headers: {
          origin: allowed,
          'access-control-request-method': method,
          'access-control-request-headers': 'authorization, content-type, idempotency-key',
        },
      })
      assert.equal(response.status, 204, `${method} ${path}`)
      assert.equal(response.headers.get('access-control-allow-origin'), allowed)
      const allowHeaders = (response.headers.get('access-control-allow-headers') ?? '')
        .split(',')
        .map((h) => h.trim().toLowerCase())
      assert.ok(allowHeaders.includes('authorization'), allowHeaders.join())
      assert.ok(allowHeaders.includes('content-type'), allowHeaders.join())
      assert.ok(allowHeaders.includes('idempotency-key'), allowHeaders.join())
      assert.ok(allowHeaders.includes('prefer'), allowHeaders.join())
      const allowMethods = response.headers.get('access-control-allow-methods') ?? ''
      assert.ok(
        allowMethods
          .split(',')
          .map((m) => m.trim())
          .includes(method),
        allowMethods,
      )
      assert.match(response.headers.get('vary') ?? '', /origin/i)
      assert.equal(await response.text(), '')
    }
  })

  it('a preflight needs no key (browsers send none)', async () => {
    const response = await fetch(`${server.url}/v1/pets`, {
      method: 'OPTIONS',
      headers: { origin: allowed, 'access-control-request-method': 'GET' },
    })
    assert.equal(response.status, 204)
    assert.equal(response.headers.get('www-authenticate'), null)
  })

  it('a GET from the origin gets Allow-Origin and exactly the exposed headers', async () => {
    const response = await server.request('/v1/pets', { headers: { origin: allowed } })
    assert.equal(response.status, 200)
    assert.equal(response.headers.get('access-control-allow-origin'), allowed)
    const exposed = (response.headers.get('access-control-expose-headers') ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase())
      .sort()
    const expected = [
      'Link',
      'Location',
      'Deprecation',
      'Sunset',
      'RateLimit',
      'RateLimit-Policy',
      'Retry-After',
      'X-Request-Id',
      'Idempotent-Replayed',
      'Preference-Applied',
      'Petstore-Staging-Fault',
    ]
    assert.deepEqual(exposed, expected.map((h) => h.toLowerCase()).sort())
    assert.deepEqual([...EXPOSED_HEADERS].sort(), [...expected].sort())
    assert.match(response.headers.get('vary') ?? '', /origin/i)
    await response.body?.cancel()
  })

  it('error responses to the origin are readable by it too', async () => {
    const unauthorized = await fetch(`${server.url}/v1/pets`, { headers: { origin: allowed } })
    assert.equal(unauthorized.status, 401)
    assert.equal(unauthorized.headers.get('access-control-allow-origin'), allowed)
    await unauthorized.body?.cancel()

    const created = await createPet(
      server,
      { name: 'Cors', categoryId: 1 },
      { headers: { origin: allowed } },
    )
    assert.equal(created.status, 201)
    assert.equal(created.headers.get('access-control-allow-origin'), allowed)
    assert.ok(created.headers.get('location'))
    await created.body?.cancel()
  })

  it('another origin gets no Access-Control-Allow-Origin', async () => {
    for (const origin of [
      'https://evil.example.com',
      'http://app.example.com',
      'https://app.example.com.evil.com',
      'null',
    ]) {
      const get = await server.request('/v1/pets', { headers: { origin } })
      assert.equal(get.headers.get('access-control-allow-origin'), null, origin)
      await get.body?.cancel()

      const preflight = await fetch(`${server.url}/v1/pets`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'GET' },
      })
      assert.equal(preflight.headers.get('access-control-allow-origin'), null, origin)
      await preflight.body?.cancel()
    }
  })

  it('an OPTIONS that is not a preflight gets an Error body, not text', async () => {
    const response = await server.request('/v1/pets', { method: 'OPTIONS' })
    assert.ok(response.status >= 400 && response.status < 500, String(response.status))
    assert.match(response.headers.get('content-type') ?? '', /^application\/json/)
    const body = (await response.json()) as { status: number; code: string }
    assert.equal(body.status, response.status)
    assert.ok(response.headers.get('x-request-id'))
  })
})
