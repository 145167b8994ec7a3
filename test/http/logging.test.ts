// D8: logs are JSON lines that carry the request id; credentials never reach them.
import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { after, before, describe, it } from 'node:test'
import { buildApp } from '../../src/app.ts'
import type { LogLevel } from '../../src/config.ts'
import { generateApiKey } from '../../src/keys/api-key.ts'
import { issueApiKey } from '../../src/keys/issue.ts'
import { createKeyVerifier } from '../../src/keys/verifier.ts'
import { loggerOptions } from '../../src/logging.ts'
import type { Store } from '../../src/store/store.ts'
import { openTestStore } from '../helpers/server.ts'

interface LogLine {
  level: number
  time: number
  msg?: string
  reqId?: string
  [field: string]: unknown
}

/** A running app whose logs go to memory. */
async function startLoggedApp(logLevel: LogLevel, options: { failingList?: string } = {}) {
  const database = await openTestStore()
  const real = database.store
  await real.migrate()
  const { failingList } = options
  const store: Store =
    failingList === undefined
      ? real
      : {
          engine: real.engine,
          get pets() {
            const pets = real.pets
            return {
              create: (pet: Parameters<typeof pets.create>[0]) => pets.create(pet),
              createIdempotent: (...args: Parameters<typeof pets.createIdempotent>) =>
                pets.createIdempotent(...args),
              purgeIdempotencyRecords: (...args: Parameters<typeof pets.purgeIdempotencyRecords>) =>
                pets.purgeIdempotencyRecords(...args),
              get: (id: number) => pets.get(id),
              list: async () => {
                throw new Error(failingList)
              },
            }
          },
          get apiKeys() {
            return real.apiKeys
          },
          migrate: () => real.migrate(),
          ping: () => real.ping(),
          close: () => real.close(),
        }
  const { key } = await issueApiKey(real.apiKeys, 'production', 'logging')
  const bootstrapKey = 'opaque-logging-key-0123456789-abcdefghijkl'

  const chunks: string[] = []
  const stream = new Writable({
    write(chunk, _encoding, done) {
      chunks.push(String(chunk))
      done()
    },
  })
  const app = await buildApp({
    config: { rateLimit: 100, corsOrigins: [] },
    store,
    verify: createKeyVerifier({
      env: 'production',
      apiKeys: real.apiKeys,
      bootstrapKeys: [bootstrapKey],
    }),
    logger: { ...loggerOptions({ logLevel }), stream },
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  const url = `http://127.0.0.1:${address.port}`

  return {
    app,
    url,
    key,
    bootstrapKey,
    /** Everything logged so far, as text. */
    text: () => chunks.join(''),
    /** Everything logged so far, one parsed object per line (throws on a non-JSON line). */
    lines: (): LogLine[] =>
      chunks
        .join('')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as LogLine),
    async stop() {
      await app.close()
      await database.close()
    },
  }
}

type LoggedApp = Awaited<ReturnType<typeof startLoggedApp>>

for (const level of ['info', 'trace'] as const) {
  describe(`logging at LOG_LEVEL=${level} (D8)`, () => {
    let logged: LoggedApp
    const wrongKey = generateApiKey('production')
    const requestIds: string[] = []

    before(async () => {
      logged = await startLoggedApp(level)
      const { url, key, bootstrapKey } = logged
      const send = async (path: string, init: RequestInit, id: string) => {
        const headers = new Headers(init.headers)
        headers.set('x-request-id', id)
        const response = await fetch(url + path, { ...init, headers })
        assert.equal(response.headers.get('x-request-id'), id)
        await response.body?.cancel()
        requestIds.push(id)
        return response.status
      }
      const auth = { authorization: `Bearer ${key}` }
      assert.equal(await send('/v1/pets', { headers: auth }, 'log-list-1'), 200)
      assert.equal(
        await send(
          '/v1/pets',
          {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json' },
            body: JSON.stringify({ name: 'Logged', categoryId: 1 }),
          },
          'log-create-2',
        ),
        201,
      )
      assert.equal(await send('/v1/pets?limit=0', { headers: auth }, 'log-invalid-3'), 400)
      assert.equal(await send('/v1/pets/424242', { headers: auth }, 'log-missing-4'), 404)
      assert.equal(
        await send('/v1/pets', { headers: { authorization: `bearer ${wrongKey}` } }, 'log-wrong-5'),
        401,
      )
      assert.equal(
        await send(
          '/v1/pets',
          { headers: { authorization: `Bearer ${bootstrapKey}` } },
          'log-env-6',
        ),
        200,
      )
      assert.equal(
        await send('/v1/pets', { headers: { ...auth, cookie: `session=${key}` } }, 'log-cookie-7'),
        200,
      )
      // Let every "request completed" line be written.
      await logged.stop()
    })

    it('every line is a JSON object with a level and a time', () => {
      const lines = logged.lines()
      assert.ok(lines.length > 0, 'nothing was logged')
      for (const line of lines) {
        assert.equal(typeof line.level, 'number')
        assert.equal(typeof line.time, 'number')
      }
    })

    it('the lines of each request carry its request id', () => {
      const lines = logged.lines()
      for (const id of requestIds) {
        const mine = lines.filter((line) => line.reqId === id)
        assert.ok(mine.length >= 2, `${id}: ${mine.length} lines (incoming and completed)`)
        assert.ok(
          mine.some((line) => /incoming request/.test(line.msg ?? '')),
          `${id}: no incoming request line`,
        )
        const completed = mine.find((line) => /request completed/.test(line.msg ?? ''))
        assert.ok(completed, `${id}: no request completed line`)
        assert.equal(typeof (completed.res as { statusCode?: unknown })?.statusCode, 'number')
      }
    })

    it('no API key appears, neither alone nor after "Bearer"', () => {
      const text = logged.text()
      for (const secret of [logged.key, logged.bootstrapKey, wrongKey]) {
        assert.ok(!text.includes(secret), 'a key reached the log')
        // The random part alone, in case the prefix were cut off.
        assert.ok(!text.includes(secret.slice(-20)), 'part of a key reached the log')
      }
      assert.doesNotMatch(text, /bearer\s+\S/i)
    })
  })
}

describe('logging: redaction of the Authorization header (D8)', () => {
  let logged: LoggedApp

  before(async () => {
    logged = await startLoggedApp('info')
  })
  after(() => logged.stop().catch(() => {}))

  it('a logged request or headers object never shows Authorization or Cookie', async () => {
    const secret = generateApiKey('production')
    logged.app.log.info(
      { req: { headers: { authorization: `Bearer ${secret}`, cookie: `s=${secret}` } } },
      'a request with headers',
    )
    logged.app.log.info({ headers: { authorization: `Bearer ${secret}` } }, 'bare headers')
    const lines = logged.lines()
    const withReq = lines.find((line) => line.msg === 'a request with headers')
    const withHeaders = lines.find((line) => line.msg === 'bare headers')
    assert.ok(withReq && withHeaders)
    // Fastify's request serializer keeps no headers at all; if one ever does, they are redacted.
    const reqHeaders = (withReq.req as { headers?: Record<string, string> }).headers
    if (reqHeaders !== undefined) {
      assert.equal(reqHeaders.authorization, '[redacted]')
      assert.equal(reqHeaders.cookie, '[redacted]')
    }
    assert.equal((withHeaders.headers as Record<string, string>).authorization, '[redacted]')
    assert.ok(!logged.text().includes(secret))
  })

  it('credentials in the URL never reach the log, whatever the parameter or path (D16)', async () => {
    const key = generateApiKey('production')
    const opaque = 'opaque-secret-value-0123456789'
    const paths = [
      `/v1/pets?access_token=${opaque}`,
      `/v1/pets?limit=5&api_key=${opaque}`,
      `/v1/pets?Token=${opaque}&status=sold`,
      `/v1/pets?key=${opaque}`,
      `/v1/pets?q=${key}`,
      `/v1/pets/${key}`,
    ]
    for (const path of paths) await fetch(logged.url + path)
    const text = logged.text()
    assert.ok(!text.includes(opaque), 'a credential-like parameter is redacted')
    assert.ok(!text.includes(key), 'a key of ours is redacted anywhere in the URL')
    const urls = logged
      .lines()
      .map((line) => (line.req as { url?: string } | undefined)?.url)
      .filter((url) => url !== undefined)
    assert.ok(urls.includes('/v1/pets?limit=5&api_key=[redacted]'), JSON.stringify(urls))
    assert.ok(urls.includes('/v1/pets?Token=[redacted]&status=sold'))
  })
})

describe('logging: a 500 is logged in full, with its request id (D4, D8)', () => {
  const CAUSE = 'disk I/O error while reading pets'
  let logged: LoggedApp

  before(async () => {
    logged = await startLoggedApp('info', { failingList: CAUSE })
  })
  after(() => logged.stop().catch(() => {}))

  it('the client gets internal_error; the log gets the cause under the same request id', async () => {
    const response = await fetch(`${logged.url}/v1/pets`, {
      headers: { authorization: `Bearer ${logged.key}`, 'x-request-id': 'log-500-1' },
    })
    assert.equal(response.status, 500)
    const body = (await response.json()) as { code: string; message: string }
    assert.equal(body.code, 'internal_error')
    assert.ok(!body.message.includes(CAUSE))

    await logged.app.close()
    const errorLine = logged.lines().find((line) => line.reqId === 'log-500-1' && line.level >= 50)
    assert.ok(errorLine, 'no error line for the request')
    assert.match(JSON.stringify(errorLine), new RegExp(CAUSE))
    assert.ok(!logged.text().includes(logged.key))
  })
})
