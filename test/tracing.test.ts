// D23: tracing, seen from outside: the real `petstore serve` exporting to an OTLP/HTTP receiver
// the test starts (helpers/otlp-receiver.ts), on SQLite and on PostgreSQL. One trace per
// request, continuing the caller's; the server span named by route with its attributes; the
// store's spans under it; the log line's ids the span's; no key in any attribute; a collector
// that is down or hangs costs the requests nothing and never ends the process; SIGTERM sends
// what is queued, under --workers too; and with no endpoint, nothing of it is loaded at all.
import assert from 'node:assert/strict'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { pathToFileURL } from 'node:url'
import { generateApiKey } from '../src/contract/api-key.ts'
import { freePort } from './helpers/free-port.ts'
import { type LogLine, logLines, WARN } from './helpers/logs.ts'
import {
  callerContext,
  type OtlpReceiver,
  type ReceivedSpan,
  serverSpans,
  startOtlpReceiver,
  traceOf,
} from './helpers/otlp-receiver.ts'
import { createTestDatabase, postgresSkipReason, type TestDatabase } from './helpers/postgres.ts'
import { type ServiceProcess, startService } from './helpers/process.ts'
import { tempDir } from './helpers/server.ts'

const KEY = generateApiKey('production')
const VERSION = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string
  }
).version

const scratchDirs: { remove(): Promise<void> }[] = []
after(async () => {
  for (const dir of scratchDirs) await dir.remove()
})

/** A temporary folder, removed after the file's tests. */
async function scratch(): Promise<string> {
  const dir = await tempDir()
  scratchDirs.push(dir)
  return dir.path
}

function call(
  service: ServiceProcess,
  path: string,
  options: { traceparent?: string; body?: object; idempotencyKey?: string } = {},
) {
  const headers: Record<string, string> = { authorization: `Bearer ${KEY}` }
  if (options.traceparent) headers.traceparent = options.traceparent
  if (options.idempotencyKey) headers['idempotency-key'] = options.idempotencyKey
  if (options.body) headers['content-type'] = 'application/json'
  return fetch(service.url + path, {
    method: options.body ? 'POST' : 'GET',
    headers,
    ...(options.body ? { body: JSON.stringify(options.body) } : {}),
  })
}

function tracingEnv(receiver: { url: string }, more: Record<string, string> = {}) {
  return {
    PETSTORE_API_KEYS: KEY,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_TRACES_SAMPLER: 'always_on',
    OTEL_BSP_SCHEDULE_DELAY: '100',
    ...more,
  }
}

/** The span and its ancestors, nearest first. */
function lineage(span: ReceivedSpan, spans: ReceivedSpan[]): ReceivedSpan[] {
  const byId = new Map(spans.map((each) => [each.spanId, each]))
  const chain = [span]
  let parent = span.parentSpanId ? byId.get(span.parentSpanId) : undefined
  while (parent !== undefined) {
    chain.push(parent)
    parent = parent.parentSpanId ? byId.get(parent.parentSpanId) : undefined
  }
  return chain
}

function only<T>(items: T[], what: string): T {
  assert.equal(items.length, 1, `one ${what}, got ${items.length}`)
  return items[0] as T
}

/** The one request line of a trace. */
function requestLine(service: ServiceProcess, traceId: string): LogLine {
  return only(
    logLines(service.stdout()).filter(
      (line) => line.msg === 'request completed' && line.traceId === traceId,
    ),
    `log line of trace ${traceId}`,
  )
}

describe('tracing on SQLite (http/json, always_on)', () => {
  let receiver: OtlpReceiver
  let service: ServiceProcess
  const create = callerContext()
  const replay = callerContext()
  const get = callerContext()
  const refused = callerContext()
  let petId: number

  before(async () => {
    receiver = await startOtlpReceiver()
    const dir = await scratch()
    service = await startService(
      tracingEnv(receiver, { DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}` }),
    )
    const pet = { name: 'Rex', categoryId: 1 }
    const created = await call(service, '/v1/pets', {
      traceparent: create.traceparent,
      body: pet,
      idempotencyKey: 'trace-1',
    })
    assert.equal(created.status, 201)
    petId = ((await created.json()) as { id: number }).id
    const replayed = await call(service, '/v1/pets', {
      traceparent: replay.traceparent,
      body: pet,
      idempotencyKey: 'trace-1',
    })
    assert.equal(replayed.headers.get('idempotent-replayed'), 'true')
    assert.equal((await call(service, `/v1/pets/${petId}`, get)).status, 200)
    // The key in the query, and in the path where an id belongs: both refused, neither kept.
    const withKey = await call(service, `/v1/pets/${KEY}?api_key=${KEY}&cursor=${KEY}`, refused)
    assert.equal(withKey.status, 400)
    await receiver.waitFor(
      (spans) =>
        [create, replay, get, refused].every(
          ({ traceId }) => serverSpans(traceOf(spans, traceId)).length === 1,
        ) && spans.some((span) => span.name === 'BATCH INSERT pets'),
    )
  })
  after(async () => {
    await service?.stop()
    await receiver?.close()
  })

  test("a create continues the caller's trace: a server span named by route, with its attributes", () => {
    const spans = traceOf(receiver.spans, create.traceId)
    const server = only(serverSpans(spans), 'server span')
    assert.equal(server.name, 'POST /v1/pets')
    assert.equal(server.parentSpanId, create.parentId, "the caller's span is its parent")
    const line = requestLine(service, create.traceId)
    assert.ok(typeof line.keyId === 'string' && line.keyId !== '')
    assert.deepEqual(
      {
        method: server.attributes['http.request.method'],
        status: server.attributes['http.response.status_code'],
        route: server.attributes['http.route'],
        path: server.attributes['url.path'],
        client: server.attributes['client.address'],
        scheme: server.attributes['url.scheme'],
        protocol: server.attributes['network.protocol.version'],
        keyId: server.attributes['petstore.api_key.id'],
        idempotency: server.attributes['petstore.idempotency_key.outcome'],
      },
      {
        method: 'POST',
        status: 201,
        route: '/v1/pets',
        path: '/v1/pets',
        client: '127.0.0.1',
        scheme: 'http',
        protocol: '1.1',
        keyId: line.keyId,
        idempotency: 'created',
      },
    )
    assert.equal(server.resource['service.name'], 'petstore')
    assert.equal(server.resource['service.version'], VERSION)
    assert.equal(server.resource['deployment.environment.name'], 'production')
    assert.match(String(server.resource['service.instance.id']), /^[0-9a-f-]{36}$/)
  })

  test('the log line carries the server span’s trace and span ids', () => {
    for (const caller of [create, replay, get, refused]) {
      const server = only(serverSpans(traceOf(receiver.spans, caller.traceId)), 'server span')
      const line = requestLine(service, caller.traceId)
      assert.equal(line.spanId, server.spanId)
      assert.ok(line.reqId, 'X-Request-Id stays')
    }
  })

  test("the create's store spans: its INSERT under the server span, the group commit linking it", () => {
    const spans = traceOf(receiver.spans, create.traceId)
    const server = only(serverSpans(spans), 'server span')
    const insert = only(
      spans.filter((span) => span.name === 'INSERT pets'),
      'INSERT pets',
    )
    assert.ok(lineage(insert, spans).includes(server), 'the INSERT descends from the server span')
    assert.deepEqual(
      {
        system: insert.attributes['db.system.name'],
        operation: insert.attributes['db.operation.name'],
        table: insert.attributes['db.collection.name'],
      },
      { system: 'sqlite', operation: 'INSERT', table: 'pets' },
    )
    const batch = receiver.spans.filter(
      (span) =>
        span.name === 'BATCH INSERT pets' &&
        span.links.some((link) => link.spanId === insert.spanId),
    )
    const commit = only(batch, 'group commit linking the create')
    assert.ok(Number(commit.attributes['db.operation.batch.size']) >= 1)
  })

  test('a replay says so, a read has its SELECT, a refusal its error code', () => {
    const replayed = only(serverSpans(traceOf(receiver.spans, replay.traceId)), 'server span')
    assert.equal(replayed.attributes['petstore.idempotency_key.outcome'], 'replayed')

    const spans = traceOf(receiver.spans, get.traceId)
    const server = only(serverSpans(spans), 'server span')
    assert.equal(server.name, 'GET /v1/pets/{petId}')
    assert.equal(server.attributes['http.route'], '/v1/pets/{petId}')
    const select = only(
      spans.filter((span) => span.name === 'SELECT pets'),
      'SELECT pets',
    )
    assert.ok(lineage(select, spans).includes(server))
    assert.equal(server.scope, '@fastify/otel')

    const refusal = only(serverSpans(traceOf(receiver.spans, refused.traceId)), 'server span')
    assert.equal(refusal.attributes['http.response.status_code'], 400)
    assert.equal(refusal.attributes['petstore.error.code'], 'invalid_request')
    assert.notEqual(refusal.status.code, 2, "a 4xx is the client's error, not the server's")
    assert.deepEqual(refusal.events ?? [], [], 'no exception event for an answer')
  })

  test('no key appears in any span, wherever the client put it', () => {
    assert.ok(receiver.spans.length > 0)
    const text = JSON.stringify(receiver.spans)
    assert.ok(!text.includes(KEY), 'the key is in a span')
    const refusal = only(serverSpans(traceOf(receiver.spans, refused.traceId)), 'server span')
    assert.match(String(refusal.attributes['url.path']), /\[redacted\]/)
  })

  test('probes and scrapes make no spans', async () => {
    const before = receiver.spans.length
    assert.equal((await fetch(`${service.url}/healthz`)).status, 200)
    assert.equal((await fetch(`${service.url}/readyz`)).status, 200)
    // A traced request after them: once it is in, anything of the probes would be too.
    const marker = callerContext()
    await call(service, '/v1/pets?limit=1', marker)
    await receiver.waitFor((spans) => serverSpans(traceOf(spans, marker.traceId)).length === 1)
    const since = receiver.spans.slice(before)
    assert.deepEqual(
      since.filter((span) => span.traceId !== marker.traceId).map((span) => span.name),
      [],
    )
  })
})

describe('tracing with the defaults: http/protobuf, parent-based ratio sampler', () => {
  let receiver: OtlpReceiver
  let service: ServiceProcess
  before(async () => {
    receiver = await startOtlpReceiver()
    service = await startService({
      PETSTORE_API_KEYS: KEY,
      DATABASE_URL: 'sqlite::memory:',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
    })
  })
  after(async () => {
    await service?.stop()
    await receiver?.close()
  })

  test("a caller's sampled trace is exported in protobuf; an unsampled one is not, yet logged", async () => {
    const unsampled = callerContext(false)
    const sampled = callerContext(true)
    assert.equal((await call(service, '/v1/pets', unsampled)).status, 200)
    assert.equal((await call(service, '/v1/pets', sampled)).status, 200)
    const sampledId = Buffer.from(sampled.traceId, 'hex')
    const deadline = Date.now() + 15_000
    while (!receiver.protobuf.some(({ body }) => body.includes(sampledId))) {
      assert.ok(Date.now() < deadline, 'the sampled trace was not exported')
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    assert.ok(
      receiver.protobuf.every(({ contentType }) => contentType === 'application/x-protobuf'),
    )
    // No maintained npm package decodes OTLP's protobuf without its .proto files; the trace id
    // (bytes) and the server span's name (a UTF-8 string) are in the request as written.
    const exported = Buffer.concat(receiver.protobuf.map(({ body }) => body))
    assert.ok(exported.includes(Buffer.from('GET /v1/pets', 'utf8')))
    const unsampledId = Buffer.from(unsampled.traceId, 'hex')
    assert.ok(!receiver.protobuf.some(({ body }) => body.includes(unsampledId)))
    // Not exported, but the log line still ties the request to the caller's trace.
    assert.equal(requestLine(service, unsampled.traceId).status, 200)
  })
})

describe('a collector that is down or hangs', () => {
  test('down: every request answered as usual, said once in the log, the process lives and stops cleanly', async () => {
    const closed = { url: `http://127.0.0.1:${await freePort()}` }
    // The exporter retries a refused batch until its timeout (OTEL_EXPORTER_OTLP_TIMEOUT) ends.
    const service = await startService(
      tracingEnv(closed, {
        DATABASE_URL: 'sqlite::memory:',
        OTEL_BSP_SCHEDULE_DELAY: '50',
        OTEL_EXPORTER_OTLP_TIMEOUT: '500',
        PETSTORE_RATE_LIMIT: '0',
      }),
    )
    const cannotExport = () =>
      logLines(service.stdout()).filter((line) =>
        String(line.msg).startsWith('tracing: spans cannot be exported'),
      )
    try {
      for (let round = 0; round < 5 || cannotExport().length === 0; round++) {
        assert.ok(round < 100, 'the failure was never said')
        const statuses = await Promise.all(
          Array.from({ length: 20 }, () =>
            call(service, '/v1/pets', { body: { name: 'Rex', categoryId: 1 } }).then(
              (response) => response.status,
            ),
          ),
        )
        assert.deepEqual(new Set(statuses), new Set([201]))
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      const said = cannotExport()
      assert.equal(said.length, 1, 'said once')
      assert.equal(said[0]?.level, WARN)
    } finally {
      assert.equal(await service.stop(), 0)
    }
  })

  test('hanging: requests answered, a full queue said once, SIGTERM stops within the drain', async () => {
    const receiver = await startOtlpReceiver({ answer: 'never' })
    const service = await startService(
      tracingEnv(receiver, {
        DATABASE_URL: 'sqlite::memory:',
        OTEL_BSP_SCHEDULE_DELAY: '50',
        PETSTORE_RATE_LIMIT: '0',
      }),
    )
    try {
      // Two spans a list (the server span, its SELECT): 1,600 lists fill the 2,048 queue.
      for (let round = 0; round < 40; round++) {
        const statuses = await Promise.all(
          Array.from({ length: 40 }, () =>
            call(service, '/v1/pets?limit=1').then((response) => response.status),
          ),
        )
        assert.deepEqual(new Set(statuses), new Set([200]))
      }
      const full = logLines(service.stdout()).filter((line) =>
        String(line.msg).startsWith('tracing: the span queue is full'),
      )
      assert.equal(full.length, 1, 'said once')
      assert.ok(receiver.requests >= 1, 'the exporter tried')
    } finally {
      assert.equal(await service.stop(), 0)
      await receiver.close()
    }
    assert.ok(
      logLines(service.stdout()).some((line) =>
        String(line.msg).startsWith('tracing: the last spans were not exported in time'),
      ),
    )
  })
})

describe('SIGTERM sends what is queued', () => {
  test('under --workers, each worker exports its spans before it exits', async () => {
    const receiver = await startOtlpReceiver()
    const dir = await scratch()
    // No batch is sent on a timer within the test: only the shutdown's flush sends them.
    const service = await startService(
      tracingEnv(receiver, {
        DATABASE_URL: `sqlite:${join(dir, 'petstore.db')}`,
        OTEL_BSP_SCHEDULE_DELAY: '60000',
      }),
      ['--workers', '2'],
    )
    const callers = Array.from({ length: 6 }, () => callerContext())
    try {
      for (const caller of callers) {
        assert.equal((await call(service, '/v1/pets?limit=1', caller)).status, 200)
      }
      assert.equal(receiver.spans.length, 0, 'nothing sent before the stop')
    } finally {
      assert.equal(await service.stop(), 0)
    }
    for (const { traceId } of callers) {
      assert.equal(serverSpans(traceOf(receiver.spans, traceId)).length, 1, traceId)
    }
    await receiver.close()
  })
})

describe('tracing off', () => {
  /** The files a service loaded, recorded by a module hook given through NODE_OPTIONS. */
  async function modulesLoaded(env: Record<string, string>): Promise<string[]> {
    const dir = await scratch()
    const hook = join(dir, 'record.mjs')
    const record = join(dir, 'loaded.txt')
    writeFileSync(
      hook,
      `import { registerHooks } from 'node:module'
import { writeFileSync } from 'node:fs'
const seen = new Set()
registerHooks({ resolve(specifier, context, next) { const found = next(specifier, context); seen.add(found.url); return found } })
process.on('exit', () => writeFileSync(${JSON.stringify(record)}, [...seen].join('\\n')))
`,
    )
    const service = await startService({
      PETSTORE_API_KEYS: KEY,
      DATABASE_URL: 'sqlite::memory:',
      NODE_OPTIONS: `--import=${pathToFileURL(hook).href}`,
      ...env,
    })
    assert.equal((await call(service, '/v1/pets?limit=1')).status, 200)
    assert.equal(await service.stop(), 0)
    return readFileSync(record, 'utf8').split('\n')
  }

  // The API alone is no part of it: a facade that does nothing until an SDK is installed, which
  // prom-client loads for itself (processCpuTotal.js), tracing or not.
  const TRACING_PARTS =
    /node_modules\/(@opentelemetry\/(?!api\/)|@fastify\/otel\/|import-in-the-middle\/)/

  test('with no endpoint, nothing of OpenTelemetry is loaded', async () => {
    const loaded = await modulesLoaded({})
    assert.ok(
      loaded.some((url) => url.includes('node_modules/fastify/')),
      'the hook records',
    )
    assert.deepEqual(
      loaded.filter((url) => TRACING_PARTS.test(url)),
      [],
    )
  })

  test('OTEL_SDK_DISABLED=true turns it off with an endpoint set', async () => {
    const loaded = await modulesLoaded({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
      OTEL_SDK_DISABLED: 'true',
    })
    assert.deepEqual(
      loaded.filter((url) => TRACING_PARTS.test(url)),
      [],
    )
  })
})

describe('tracing on PostgreSQL', async () => {
  const skip = await postgresSkipReason()
  let receiver: OtlpReceiver
  let service: ServiceProcess
  let database: TestDatabase
  before(async () => {
    if (skip) return
    receiver = await startOtlpReceiver()
    database = await createTestDatabase()
    service = await startService(
      tracingEnv(receiver, { DATABASE_URL: database.url, DATABASE_POOLER: database.pooler }),
    )
  })
  after(async () => {
    await service?.stop()
    await receiver?.close()
    await database?.drop()
  })

  test("a create's trace holds pg's spans under its server span, and no SQLite span", {
    skip,
  }, async () => {
    const caller = callerContext()
    const created = await call(service, '/v1/pets', {
      traceparent: caller.traceparent,
      body: { name: 'Rex', categoryId: 1 },
    })
    assert.equal(created.status, 201)
    await receiver.waitFor(
      (spans) =>
        traceOf(spans, caller.traceId).some(
          (span) => span.scope === '@opentelemetry/instrumentation-pg',
        ) && serverSpans(traceOf(spans, caller.traceId)).length === 1,
    )
    const spans = traceOf(receiver.spans, caller.traceId)
    const server = only(serverSpans(spans), 'server span')
    assert.equal(server.name, 'POST /v1/pets')
    assert.equal(server.parentSpanId, caller.parentId)
    const queries = spans.filter((span) => span.scope === '@opentelemetry/instrumentation-pg')
    for (const query of queries) {
      assert.ok(lineage(query, spans).includes(server), `${query.name} under the server span`)
      const system = query.attributes['db.system.name'] ?? query.attributes['db.system']
      assert.equal(system, 'postgresql')
    }
    assert.ok(!spans.some((span) => span.attributes['db.system.name'] === 'sqlite'))
    assert.equal(requestLine(service, caller.traceId).spanId, server.spanId)
    assert.ok(!JSON.stringify(spans).includes(KEY))
  })
})
