// D4/D15: every error, framework-level ones included, is application/json {code, message,
// status} with status equal to the HTTP status; codes come from one closed catalog; a 500
// never leaks internals; routes the interface does not show are 404.
import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { BODY_LIMIT_BYTES } from '../../src/contract/limits.ts'
import { errorCatalog, errorCodes } from '../../src/errors.ts'
import type { Store } from '../../src/store/store.ts'
import { failingStore } from '../helpers/failing-store.ts'
import {
  createPet,
  errorOf,
  openTestStore,
  startServer,
  type TestServer,
  type TestStore,
} from '../helpers/server.ts'

/** Asserts an Error body with this status and code; returns it. */
async function expectError(response: Response, status: number, code: string) {
  assert.equal(response.status, status, `expected ${status} ${code}`)
  assert.match(response.headers.get('content-type') ?? '', /^application\/json/)
  const body = await errorOf(response)
  assert.equal(body.code, code)
  assert.deepEqual(Object.keys(body).sort(), ['code', 'message', 'status'])
  return body
}

/** A raw HTTP/1.1 exchange, for methods fetch refuses to send. */
function rawRequest(server: TestServer, head: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(server.url).port), '127.0.0.1')
    let data = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk) => {
      data += chunk
    })
    socket.on('error', reject)
    socket.on('end', () => {
      const [statusLine = '', ...rest] = data.split('\r\n')
      resolve({
        status: Number(statusLine.split(' ')[1]),
        body: rest.join('\r\n').split('\r\n\r\n')[1] ?? '',
      })
    })
    socket.write(`${head}\r\nHost: localhost\r\nConnection: close\r\n\r\n`)
  })
}

describe('errors (D4, D15)', () => {
  let server: TestServer

  before(async () => {
    server = await startServer()
  })
  after(() => server.close())

  describe('unknown routes are 404 not_found (D15)', () => {
    const paths = [
      '/nope',
      '/v1',
      '/v1/',
      '/v1/orders',
      '/v1/store/orders',
      '/v1/store/inventory',
      '/v1/categories',
      '/v1/categories/1',
      '/v1/webhooks',
      '/v1/pets/1/photos',
      '/v2/pets',
      '/pets',
      '/V1/PETS',
    ]
    for (const path of paths) {
      it(`GET ${path}, with and without a key`, async () => {
        const withKey = await expectError(await server.request(path), 404, 'not_found')
        assert.match(withKey.message, /no route/)
        await expectError(await fetch(server.url + path), 404, 'not_found')
      })
    }

    it('POST /v1/orders is 404 too', async () => {
      const response = await server.request('/v1/orders', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      })
      await expectError(response, 404, 'not_found')
    })

    it('the 404 message does not echo an unbounded path', async () => {
      const long = `/${'x'.repeat(5000)}`
      const body = await expectError(await server.request(long), 404, 'not_found')
      assert.ok(body.message.length < 400, `message is ${body.message.length} characters`)
    })
  })

  describe('a known path with another method is 405 with Allow', () => {
    const cases = [
      { method: 'DELETE', path: '/v1/pets', allow: ['GET', 'HEAD', 'POST'] },
      { method: 'PUT', path: '/v1/pets', allow: ['GET', 'HEAD', 'POST'] },
      { method: 'PATCH', path: '/v1/pets', allow: ['GET', 'HEAD', 'POST'] },
      { method: 'PUT', path: '/v1/pets/1', allow: ['GET', 'HEAD'] },
      { method: 'PATCH', path: '/v1/pets/1', allow: ['GET', 'HEAD'] },
      { method: 'DELETE', path: '/v1/pets/1', allow: ['GET', 'HEAD'] },
      { method: 'POST', path: '/v1/pets/1', allow: ['GET', 'HEAD'] },
      { method: 'POST', path: '/healthz', allow: ['GET', 'HEAD'] },
      { method: 'DELETE', path: '/v1/openapi.json', allow: ['GET', 'HEAD'] },
    ]
    for (const { method, path, allow } of cases) {
      it(`${method} ${path}`, async () => {
        const response = await server.request(path, { method })
        const allowed = (response.headers.get('allow') ?? '').split(',').map((m) => m.trim())
        const body = await expectError(response, 405, 'method_not_allowed')
        assert.deepEqual(allowed.sort(), [...allow].sort())
        assert.ok(!allowed.includes(method))
        assert.match(body.message, new RegExp(method))
      })
    }

    it('OPTIONS on an API path (CORS off) is 405 too', async () => {
      const response = await server.request('/v1/pets', { method: 'OPTIONS' })
      await expectError(response, 405, 'method_not_allowed')
      assert.ok(response.headers.get('allow')?.includes('POST'))
    })

    it('every method Allow lists for /v1/pets really is served', async () => {
      const response = await server.request('/v1/pets', { method: 'DELETE' })
      await response.body?.cancel()
      for (const method of (response.headers.get('allow') ?? '').split(', ')) {
        const answer =
          method === 'POST'
            ? await createPet(server, { name: 'Allowed', categoryId: 1 })
            : await server.request('/v1/pets', { method })
        assert.ok(answer.status === 200 || answer.status === 201, `${method}: ${answer.status}`)
        await answer.body?.cancel()
      }
    })

    it('an extension method on a known path is an Error body, not a bare reply', async () => {
      const { status, body } = await rawRequest(server, 'PROPFIND /v1/pets HTTP/1.1')
      assert.ok(status === 404 || status === 405, `status ${status}`)
      const parsed = JSON.parse(body) as { status: number; code: string }
      assert.equal(parsed.status, status)
    })
  })

  describe('framework errors use the Error body', () => {
    it('413 payload_too_large for a body over the limit', async () => {
      const response = await server.request('/v1/pets', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'x'.repeat(BODY_LIMIT_BYTES), categoryId: 1 }),
      })
      await expectError(response, 413, 'payload_too_large')
    })

    it('415 unsupported_media_type for a non-JSON body', async () => {
      const response = await server.request('/v1/pets', {
        method: 'POST',
        headers: { 'content-type': 'text/plain' },
        body: 'name=Rex',
      })
      await expectError(response, 415, 'unsupported_media_type')
    })

    it('400 invalid_request for malformed JSON', async () => {
      const response = await server.request('/v1/pets', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"name": "Rex",',
      })
      await expectError(response, 400, 'invalid_request')
    })

    it('400 invalid_request, not a framework body, for a malformed %-escape in the path', async () => {
      for (const path of ['/v1/pets/%ZZ', '/%E0%A4%A']) {
        const response = await server.request(path)
        const body = await expectError(response, 400, 'invalid_request')
        assert.doesNotMatch(body.message, /FST_/)
        assert.ok(response.headers.get('x-request-id'))
      }
    })

    it('400 invalid_request for a path parameter over the router limit, without echoing it', async () => {
      const id = '1'.repeat(300)
      const body = await expectError(await server.request(`/v1/pets/${id}`), 400, 'invalid_request')
      assert.ok(!body.message.includes(id))
    })
  })

  it('no error code is outside the catalog, and each status matches it', async () => {
    const responses = [
      await server.request('/nope'),
      await server.request('/v1/pets', { method: 'DELETE' }),
      await fetch(`${server.url}/v1/pets`),
      await server.request('/v1/pets?limit=0'),
      await server.request('/v1/pets/123456789'),
    ]
    for (const response of responses) {
      const body = await errorOf(response)
      assert.ok((errorCodes as string[]).includes(body.code), body.code)
      assert.equal(errorCatalog[body.code as keyof typeof errorCatalog].status, response.status)
    }
  })

  describe('the catalog and the published contract agree', () => {
    it('components.schemas.Error.code.enum is exactly the catalog', async () => {
      const response = await fetch(`${server.url}/v1/openapi.json`)
      assert.equal(response.status, 200)
      const doc = (await response.json()) as {
        components: {
          schemas: Record<
            string,
            { properties: Record<string, { enum?: string[]; type?: string }>; required?: string[] }
          >
        }
      }
      const schema = doc.components.schemas.Error
      assert.ok(schema, 'an Error schema is published')
      assert.deepEqual(schema.properties.code?.enum, Object.keys(errorCatalog))
      assert.deepEqual([...(schema.required ?? [])].sort(), ['code', 'message', 'status'])
    })

    it('every catalog status is an error status, and codes are distinct per status', () => {
      const seen = new Map<number, string>()
      for (const [code, { status }] of Object.entries(errorCatalog)) {
        assert.ok(status >= 400 && status <= 599, code)
        assert.equal(
          seen.get(status),
          undefined,
          `${code} shares ${status} with ${seen.get(status)}`,
        )
        seen.set(status, code)
      }
    })
  })
})

describe('a failing store: 500 internal_error without internals (D4)', () => {
  const SECRET = 'SQLITE_CORRUPT at /srv/secret/petstore.db password=hunter2'
  let database: TestStore
  let real: Store
  let server: TestServer

  before(async () => {
    database = await openTestStore()
    real = database.store
    const failing = failingStore(real, {
      pets: {
        // Rejects, as an async driver would.
        list: async () => {
          throw new Error(SECRET)
        },
        // Throws synchronously, before any promise exists.
        get: () => {
          throw new TypeError(SECRET)
        },
      },
    })
    server = await startServer({ store: failing })
  })
  after(async () => {
    await server.close()
    await database.close()
  })

  for (const path of ['/v1/pets', '/v1/pets?limit=5&status=sold', '/v1/pets/1']) {
    it(`GET ${path} is 500 internal_error and says nothing of the cause`, async () => {
      const response = await server.request(path)
      const text = await response.clone().text()
      const body = await expectError(response, 500, 'internal_error')
      // Neither the thrown message, nor its class, nor a stack frame.
      for (const leak of [
        /SQLITE/,
        /secret/,
        /hunter2/,
        /password/,
        /TypeError/,
        /:\d+:\d+/,
        /\.ts\b/,
      ]) {
        assert.doesNotMatch(text, leak)
      }
      const requestId = response.headers.get('x-request-id')
      assert.ok(requestId, 'a 500 carries X-Request-Id so it can be reported')
      assert.match(body.message, /X-Request-Id/)
    })
  }

  it('the rest of the service still works (creates go through)', async () => {
    const response = await createPet(server, { name: 'Survivor', categoryId: 3 })
    assert.equal(response.status, 201)
  })

  it('auth still comes first: without a key it is 401, not 500', async () => {
    const response = await fetch(`${server.url}/v1/pets`)
    await expectError(response, 401, 'unauthorized')
  })
})
