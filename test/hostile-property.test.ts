// Property-based tests over raw sockets (D4, D16): whatever bytes a client sends, every answer
// is a well-formed HTTP/1.1 response, every error is the Error body with its request id, the
// service keeps serving, and nothing is stored. Engine-independent, so it runs once.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import fc from 'fast-check'
import { exchange, type RawResponse, rawRequest } from './helpers/raw-http.ts'
import { startServer, type TestServer } from './helpers/server.ts'

const NUM_RUNS = 100

function assertWellFormedAnswer(response: RawResponse): void {
  assert.match(response.headers['x-request-id'] ?? '', /^[A-Za-z0-9._:-]{1,128}$/)
  if (response.status < 400) return
  assert.match(response.headers['content-type'] ?? '', /^application\/json/)
  const body = JSON.parse(response.body) as { code?: unknown; message?: unknown; status?: unknown }
  assert.equal(body.status, response.status)
  assert.equal(typeof body.code, 'string')
  assert.equal(typeof body.message, 'string')
}

describe('raw-socket properties (D4, D16)', () => {
  let server: TestServer
  let valid: string[]
  before(async () => {
    server = await startServer({ connections: { headersTimeoutMs: 500, requestTimeoutMs: 500 } })
    const auth = { authorization: `Bearer ${server.key}` }
    valid = [
      rawRequest('GET', '/v1/pets?limit=2', auth),
      rawRequest('GET', '/healthz'),
      // No categoryId: a create no small mutation turns into a valid one, so nothing may be stored.
      rawRequest(
        'POST',
        '/v1/pets',
        { ...auth, 'content-type': 'application/json' },
        '{"name":""}',
      ),
    ]
  })
  after(() => server.close())

  async function petCount(): Promise<number> {
    const pets = (await (await server.request('/v1/pets?limit=100')).json()) as unknown[]
    return pets.length
  }

  test('arbitrary bytes, or a valid request with bytes changed, dropped or inserted: only well-formed answers', async () => {
    const mutation = fc.oneof(
      fc.record({ kind: fc.constant('set'), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
      fc.record({ kind: fc.constant('drop'), at: fc.nat(), byte: fc.constant(0) }),
      fc.record({
        kind: fc.constant('insert'),
        at: fc.nat(),
        byte: fc.integer({ min: 0, max: 255 }),
      }),
    )
    const mutated = fc
      .tuple(fc.nat({ max: 2 }), fc.array(mutation, { minLength: 1, maxLength: 4 }))
      .map(([which, mutations]) => {
        const bytes = [...Buffer.from(valid[which] ?? '', 'latin1')]
        for (const { kind, at, byte } of mutations) {
          const i = at % (bytes.length + 1)
          if (kind === 'set') bytes[i] = byte
          else if (kind === 'drop') bytes.splice(i, 1)
          else bytes.splice(i, 0, byte)
        }
        return Buffer.from(bytes)
      })
    const input = fc.oneof(
      fc.uint8Array({ minLength: 1, maxLength: 300 }).map(Buffer.from),
      mutated,
    )
    const before = await petCount()
    await fc.assert(
      fc.asyncProperty(input, async (bytes) => {
        const { responses } = await exchange(server.url, bytes, 3000, { end: true })
        for (const response of responses) assertWellFormedAnswer(response)
      }),
      { numRuns: NUM_RUNS },
    )
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200, 'the service still serves')
    assert.equal(await petCount(), before, 'nothing was stored')
  })

  test('valid requests pipelined and cut into arbitrary pieces: each answered once, in order', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.nat({ max: 1 }), { minLength: 1, maxLength: 5 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        async (which, cuts) => {
          const text = which.map((i) => valid[i] ?? '').join('')
          const points = [...new Set(cuts.map((cut) => cut % text.length))].sort((a, b) => a - b)
          const pieces = [0, ...points].map((start, i) =>
            text.slice(start, points[i] ?? text.length),
          )
          const { responses } = await exchange(
            server.url,
            pieces.filter((p) => p !== ''),
            3000,
            {
              end: true,
            },
          )
          assert.deepEqual(
            responses.map((response) => response.status),
            which.map(() => 200),
          )
        },
      ),
      { numRuns: NUM_RUNS },
    )
  })
})
