// D8: logs are JSON lines that carry the request id; credentials never reach them.
import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { after, before, describe, it } from 'node:test'
import { type LogLevel, loadConfig } from '../../src/config.ts'
import { generateApiKey } from '../../src/contract/api-key.ts'
import { traceIdOf } from '../../src/http/plugins/request-log.ts'
import { issueApiKey } from '../../src/keys/issue.ts'
import { loggerOptions } from '../../src/observability/logging.ts'
import { composeApp } from '../../src/process/compose.ts'
import type { Store } from '../../src/store/store.ts'
import { failingStore } from '../helpers/failing-store.ts'
import { memoryLog } from '../helpers/logs.ts'
import { openTestStore, startServer } from '../helpers/server.ts'

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
      : failingStore(real, {
          pets: {
            list: async () => {
              throw new Error(failingList)
            },
          },
        })
  const { key, record } = await issueApiKey(real.apiKeys, 'production', 'logging')
  const bootstrapKey = 'opaque-logging-key-0123456789-abcdefghijkl'

  const chunks: string[] = []
  const stream = new Writable({
    write(chunk, _encoding, done) {
      chunks.push(String(chunk))
      done()
    },
  })
  const config = loadConfig({
    PETSTORE_API_KEYS: bootstrapKey,
    PETSTORE_RATE_LIMIT: '100',
    PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '0',
  })
  const app = await composeApp(config, store, {
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
    keyId: record.id,
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
      const traced = (traceparent: string) => ({ ...auth, traceparent })
      assert.equal(
        await send(
          '/v1/pets',
          { headers: traced('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01') },
          'log-trace-8',
        ),
        200,
      )
      // An all-zero trace id is invalid (W3C Trace Context §3.2.2.3): no trace id is logged.
      assert.equal(
        await send(
          '/v1/pets',
          { headers: traced('00-00000000000000000000000000000000-00f067aa0ba902b7-01') },
          'log-trace-9',
        ),
        200,
      )
      assert.equal(await send('/wp-login.php', {}, 'log-unknown-10'), 404)
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

    it('each request has exactly one line, with its route, status, key id and error code (D17)', () => {
      const lines = logged.lines()
      const expected: Record<string, Record<string, unknown>> = {
        'log-list-1': {
          method: 'GET',
          route: '/v1/pets',
          status: 200,
          keyId: logged.keyId,
          client: '127.0.0.1',
        },
        'log-create-2': { method: 'POST', route: '/v1/pets', status: 201, keyId: logged.keyId },
        'log-invalid-3': {
          route: '/v1/pets',
          url: '/v1/pets?limit=0',
          status: 400,
          errorCode: 'invalid_request',
        },
        'log-missing-4': {
          route: '/v1/pets/{petId}',
          url: '/v1/pets/424242',
          status: 404,
          errorCode: 'not_found',
        },
        'log-wrong-5': { route: '/v1/pets', status: 401, errorCode: 'unauthorized' },
        // An environment key's id is derived from its hash (keys/verifier.ts).
        'log-env-6': { status: 200, keyId: /^env_[0-9a-f]{12}$/ },
        'log-cookie-7': { status: 200, keyId: logged.keyId },
        'log-trace-8': { status: 200, traceId: '4bf92f3577b34da6a3ce929d0e0e4736' },
        'log-trace-9': { status: 200 },
        'log-unknown-10': { method: 'GET', route: '', status: 404, errorCode: 'not_found' },
      }
      for (const id of requestIds) {
        const mine = lines.filter((line) => line.reqId === id)
        assert.equal(mine.length, 1, `${id}: one line per request, got ${mine.length}`)
        const [line] = mine
        assert.ok(line)
        assert.equal(line.level, 30, `${id}: at info`)
        assert.equal(line.msg, 'request completed')
        assert.equal(typeof line.durationMs, 'number')
        assert.ok(Number(line.durationMs) >= 0)
        for (const [field, value] of Object.entries(expected[id] ?? {})) {
          if (value instanceof RegExp) {
            assert.match(String(line[field]), value, `${id}: ${field}`)
          } else {
            assert.deepEqual(line[field], value, `${id}: ${field}`)
          }
        }
        if (line.status === 401) assert.equal(line.keyId, undefined, `${id}: no key id on a 401`)
        if (Number(line.status) < 400) assert.equal(line.errorCode, undefined, `${id}: errorCode`)
        if (id !== 'log-trace-8') assert.equal(line.traceId, undefined, `${id}: traceId`)
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
      .map((line) => (typeof line.url === 'string' ? line.url : undefined))
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

describe('logging at LOG_LEVEL=warn: only problems, no line per request (D8, D17)', () => {
  const CAUSE = 'the disk went away'
  let logged: LoggedApp

  before(async () => {
    logged = await startLoggedApp('warn', { failingList: CAUSE })
  })
  after(() => logged.stop().catch(() => {}))

  it('a 201 and a 404 write nothing; a 500 writes its cause at error', async () => {
    const headers = { authorization: `Bearer ${logged.key}` }
    const create = await fetch(`${logged.url}/v1/pets`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json', 'x-request-id': 'warn-201' },
      body: JSON.stringify({ name: 'Quiet', categoryId: 1 }),
    })
    assert.equal(create.status, 201)
    const missing = await fetch(`${logged.url}/v1/pets/5000`, {
      headers: { ...headers, 'x-request-id': 'warn-404' },
    })
    assert.equal(missing.status, 404)
    const failed = await fetch(`${logged.url}/v1/pets`, {
      headers: { ...headers, 'x-request-id': 'warn-500' },
    })
    assert.equal(failed.status, 500)
    await Promise.all([create, missing, failed].map((r) => r.arrayBuffer()))
    await logged.app.close()

    const lines = logged.lines()
    assert.deepEqual(
      lines.filter((line) => line.msg === 'request completed'),
      [],
    )
    assert.deepEqual(
      lines.map((line) => [line.reqId, line.level]),
      [['warn-500', 50]],
    )
    assert.match(JSON.stringify(lines[0]), new RegExp(CAUSE))
  })
})

describe('the trace id logged comes only from a valid W3C traceparent (D17)', () => {
  it('takes version 00 exactly, later versions with more fields, and nothing malformed', () => {
    const trace = '4bf92f3577b34da6a3ce929d0e0e4736'
    const ok = [`00-${trace}-00f067aa0ba902b7-01`, `cc-${trace}-00f067aa0ba902b7-01-extra`]
    for (const header of ok) assert.equal(traceIdOf(header), trace, header)
    for (const bad of [
      undefined,
      '',
      `00-${trace}-00f067aa0ba902b7-01-extra`, // version 00 has four fields
      `ff-${trace}-00f067aa0ba902b7-01`, // version ff is invalid
      `00-${trace.toUpperCase()}-00f067aa0ba902b7-01`, // lowercase only
      `00-${trace}-0000000000000000-01`, // all-zero parent id
      `00-${trace.slice(1)}-00f067aa0ba902b7-01`,
      `00-${trace}-00f067aa0ba902b7-01, 00-${trace}-00f067aa0ba902b7-01`, // two headers joined
      ['a', 'b'],
    ]) {
      assert.equal(traceIdOf(bad), undefined, JSON.stringify(bad))
    }
  })
})

describe('the client address logged: the peer, or X-Forwarded-For behind a trusted hop only', () => {
  async function clientLogged(trustedProxies: string[], forwardedFor?: string): Promise<unknown> {
    const log = memoryLog()
    const server = await startServer({
      trustedProxies,
      logger: { ...loggerOptions({ logLevel: 'info' }), stream: log.stream },
    })
    try {
      const headers: Record<string, string> = { 'x-request-id': 'client-address' }
      if (forwardedFor !== undefined) headers['x-forwarded-for'] = forwardedFor
      assert.equal((await server.request('/v1/pets', { headers })).status, 200)
    } finally {
      await server.close()
    }
    return log.lines().find((line) => line.reqId === 'client-address')?.client
  }

  it('without PETSTORE_TRUSTED_PROXIES a client cannot choose it with X-Forwarded-For', async () => {
    assert.equal(await clientLogged([]), '127.0.0.1')
    assert.equal(await clientLogged([], '203.0.113.7'), '127.0.0.1')
  })

  it('behind a trusted balancer, the address the balancer saw', async () => {
    assert.equal(await clientLogged(['127.0.0.1'], '203.0.113.7'), '203.0.113.7')
    assert.equal(await clientLogged(['127.0.0.0/8'], '203.0.113.7'), '203.0.113.7')
  })

  it("an address the client put before the balancer's own is not believed", async () => {
    // The client sent "198.51.100.1"; the trusted balancer appended the peer it saw.
    assert.equal(await clientLogged(['127.0.0.1'], '198.51.100.1, 203.0.113.7'), '203.0.113.7')
  })
})

describe('logging: a credential in any query parameter, or a percent-encoded key (D16)', () => {
  let logged: LoggedApp

  before(async () => {
    logged = await startLoggedApp('info')
  })
  after(() => logged.stop().catch(() => {}))

  it('never reaches the request line or a logged `req`; the rest of the URL does', async () => {
    const key = generateApiKey('production')
    const body = key.slice('petstore_live_'.length)
    const secrets = ['s1-api-key-0123456789', 's2-access-token-0123', 's3-x-api-key-0123', 's4-foo']
    // Each request as sent, and its URL as the log must show it.
    const expected: [sent: string, shown: string][] = [
      [`/v1/pets?api-key=${secrets[0]}`, '/v1/pets?api-key=[redacted]'],
      [`/v1/pets?access-token=${secrets[1]}`, '/v1/pets?access-token=[redacted]'],
      [`/v1/pets?x-api-key=${secrets[2]}`, '/v1/pets?x-api-key=[redacted]'],
      [`/v1/pets?limit=5&foo=${secrets[3]}`, '/v1/pets?limit=5&foo=[redacted]'],
      [`/v1/pets/petstore%5Flive%5F${body}`, '/v1/pets/[redacted]'],
      [`/v1/pets?cursor=petstore%5Flive%5F${body}`, '/v1/pets?cursor=[redacted]'],
    ]
    for (const [index, [sent]] of expected.entries()) {
      const response = await fetch(logged.url + sent, {
        headers: { 'x-request-id': `url-${index}` },
      })
      await response.body?.cancel()
      // The pino `req` serializer redacts the same way, for any line that logs a request.
      logged.app.log.info({ req: { url: sent } }, `a logged req ${index}`)
    }
    await logged.app.close()
    const text = logged.text()
    for (const secret of [...secrets, body]) assert.ok(!text.includes(secret), `${secret} logged`)
    const lines = logged.lines()
    for (const [index, [sent, shown]] of expected.entries()) {
      const line = lines.find((each) => each.reqId === `url-${index}`)
      assert.equal(line?.url, shown, sent)
      const req = lines.find((each) => each.msg === `a logged req ${index}`)?.req
      assert.equal((req as { url?: string } | undefined)?.url, shown, sent)
    }
  })
})

describe('the client address logged behind a balancer that writes ports; an ignored X-Forwarded-For told once', () => {
  /** Requests with these X-Forwarded-For values (by request id); the log lines, parsed. */
  async function logged(trustedProxies: string[], forwardedFor: Record<string, string>) {
    const log = memoryLog()
    const server = await startServer({
      trustedProxies,
      logger: { ...loggerOptions({ logLevel: 'info' }), stream: log.stream },
    })
    try {
      for (const [id, value] of Object.entries(forwardedFor)) {
        const headers = { 'x-request-id': id, 'x-forwarded-for': value }
        assert.equal((await server.request('/v1/pets', { headers })).status, 200)
      }
    } finally {
      await server.close()
    }
    return log.lines()
  }
  const forwardingWarnings = (lines: LogLine[]) =>
    lines.filter((line) => line.level === 40 && /^X-Forwarded-For is ignored/.test(line.msg ?? ''))

  it('the client is the address without the port the balancer wrote', async () => {
    const lines = await logged(['127.0.0.1'], {
      'port-v4': '9.9.7.1:1001',
      'port-v6': '[2001:db8::7]:1001',
    })
    const client = (id: string) => lines.find((line) => line.reqId === id)?.client
    assert.equal(client('port-v4'), '9.9.7.1')
    assert.equal(client('port-v6'), '2001:db8::7')
    assert.deepEqual(forwardingWarnings(lines), [], 'trusted: nothing to tell')
  })

  it('X-Forwarded-For with no trusted proxies: one warning naming the peer, however many requests', async () => {
    const lines = await logged([], { first: '203.0.113.7', second: '203.0.113.8' })
    const warnings = forwardingWarnings(lines)
    assert.equal(warnings.length, 1)
    assert.equal(warnings[0]?.peer, '127.0.0.1')
    assert.match(warnings[0]?.msg ?? '', /name it in PETSTORE_TRUSTED_PROXIES/)
    assert.equal(lines.find((line) => line.reqId === 'second')?.client, '127.0.0.1')
  })
})
