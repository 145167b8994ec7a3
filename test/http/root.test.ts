// D1: `GET /` points a newcomer to the reference, the contract and the liveness probe, without
// a key and without any data; other methods there are 405 like everywhere.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { createPet, errorOf, startServer, type TestServer } from '../helpers/server.ts'

const ROOT = {
  name: 'Petstore',
  docs: '/docs',
  openapi: '/v1/openapi.json',
  health: '/healthz',
}

describe('the root document (D1)', () => {
  let server: TestServer

  before(async () => {
    // A rate limit on, so that its fields would show if the root were counted against a key.
    server = await startServer({ rateLimit: 600 })
    // Data exists, so that its absence from the root document means something.
    const created = await createPet(server, { name: 'Rootless', categoryId: 3 })
    assert.equal(created.status, 201)
  })
  after(() => server.close())

  it('GET / without a key is 200 JSON naming /docs, /v1/openapi.json and /healthz, and nothing else', async () => {
    const response = await fetch(`${server.url}/`)
    assert.equal(response.status, 200)
    assert.equal(response.headers.get('content-type'), 'application/json; charset=utf-8')
    const text = await response.text()
    assert.deepEqual(JSON.parse(text), ROOT)
    assert.ok(!text.includes('Rootless'), 'no pet appears')
  })

  it('carries X-Request-Id and the security headers, like every answer', async () => {
    const response = await fetch(`${server.url}/`, { headers: { 'x-request-id': 'root-1' } })
    assert.equal(response.headers.get('x-request-id'), 'root-1')
    assert.equal(response.headers.get('x-content-type-options'), 'nosniff')
    assert.equal(
      response.headers.get('content-security-policy'),
      "default-src 'none'; frame-ancestors 'none'",
    )
    assert.equal(response.headers.get('x-frame-options'), 'DENY')
    assert.equal(response.headers.get('referrer-policy'), 'no-referrer')
    await response.body?.cancel()
  })

  it('a key, right or wrong, changes nothing: no challenge, no rate-limit fields', async () => {
    for (const authorization of [`Bearer ${server.key}`, 'Bearer definitely-not-a-key']) {
      const response = await fetch(`${server.url}/`, { headers: { authorization } })
      assert.equal(response.status, 200)
      assert.deepEqual(await response.json(), ROOT)
      assert.equal(response.headers.get('www-authenticate'), null)
      assert.equal(response.headers.get('ratelimit'), null)
      assert.equal(response.headers.get('ratelimit-policy'), null)
    }
  })

  it('HEAD / is 200 with no body', async () => {
    const response = await fetch(`${server.url}/`, { method: 'HEAD' })
    assert.equal(response.status, 200)
    assert.equal(await response.text(), '')
  })

  it('every path it names answers 200 without a key', async () => {
    const root = (await (await fetch(`${server.url}/`)).json()) as typeof ROOT
    for (const path of [root.docs, root.openapi, root.health]) {
      const response = await fetch(server.url + path)
      assert.equal(response.status, 200, path)
      await response.body?.cancel()
    }
  })

  it('is not in the OpenAPI document, like /healthz: it is not an operation of the API', async () => {
    const document = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as {
      paths: Record<string, unknown>
    }
    assert.deepEqual(Object.keys(document.paths).sort(), ['/pets', '/pets/{petId}'])
  })

  for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
    it(`${method} / is 405 with Allow: GET, HEAD`, async () => {
      const response = await fetch(`${server.url}/`, { method })
      assert.equal(response.status, 405)
      assert.equal(response.headers.get('allow'), 'GET, HEAD')
      const error = await errorOf(response)
      assert.deepEqual(error, {
        code: 'method_not_allowed',
        message: `${method} is not allowed here; use GET, HEAD`,
        status: 405,
      })
    })
  }
})
