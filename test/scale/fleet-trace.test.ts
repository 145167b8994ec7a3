// D23 across a fleet: one create through HAProxy (docs/fleet.md's configuration, which passes the
// caller's `traceparent` on untouched, and which the instances trust) to one of two instances on PostgreSQL, reached directly
// or, in the PgBouncer run (test/run.ts), through PgBouncer in transaction mode. The caller's
// trace holds the instance's server span and the driver's spans of the queries it sent, each
// naming the address it sent them to: the pooler's in that run.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { freePort } from '../helpers/free-port.ts'
import { type HAProxy, haproxySkipReason, startHAProxy } from '../helpers/haproxy.ts'
import {
  type OtlpReceiver,
  serverSpans,
  startOtlpReceiver,
  tracedCreate,
  traceOf,
} from '../helpers/otlp-receiver.ts'
import { createTestDatabase, postgresSkipReason, type TestDatabase } from '../helpers/postgres.ts'
import { type ServiceProcess, startService } from '../helpers/process.ts'
import { sharedKey } from './support.ts'

const skip = (await postgresSkipReason()) ?? haproxySkipReason()

describe('a trace through HAProxy, an instance and the database', { skip }, () => {
  let db: TestDatabase
  let balancer: HAProxy
  let receiver: OtlpReceiver
  const services: ServiceProcess[] = []
  const key = sharedKey()

  before(async () => {
    db = await createTestDatabase()
    receiver = await startOtlpReceiver()
    for (let i = 0; i < 2; i++) {
      const port = await freePort()
      services.push(
        await startService({
          DATABASE_URL: db.url,
          DATABASE_POOLER: db.pooler,
          PETSTORE_API_KEYS: key,
          PORT: String(port),
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
          OTEL_BSP_SCHEDULE_DELAY: '100',
          // HAProxy is the peer: trusted, so the caller's trace context is followed (D23).
          PETSTORE_TRUSTED_PROXIES: '127.0.0.1',
        }),
      )
    }
    balancer = await startHAProxy(
      services.map((service, i) => ({
        name: `petstore${i + 1}`,
        address: new URL(service.url).host,
      })),
    )
  })
  after(async () => {
    await Promise.all(services.map((service) => service.stop()))
    await balancer?.stop()
    await receiver?.close()
    await db?.drop()
  })

  test("one create: the caller's trace holds the instance's server span and its queries", async () => {
    // Sampled: the default parent-based sampler follows the caller's choice.
    const { traceId, parentId, status } = await tracedCreate(balancer.url, key, 'Traced')
    assert.equal(status, 201)
    await receiver.waitFor(
      (spans) =>
        serverSpans(traceOf(spans, traceId)).length === 1 &&
        traceOf(spans, traceId).some((span) => span.scope === '@opentelemetry/instrumentation-pg'),
    )
    const spans = traceOf(receiver.spans, traceId)
    const server = serverSpans(spans)[0]
    assert.equal(server?.name, 'POST /v1/pets')
    assert.equal(server?.parentSpanId, parentId, "HAProxy passed the caller's traceparent on")
    const database = new URL(db.url)
    const queries = spans.filter((span) => span.scope === '@opentelemetry/instrumentation-pg')
    assert.ok(
      queries.some((span) => /INSERT/i.test(span.name)),
      queries.map((s) => s.name).join(),
    )
    for (const query of queries) {
      assert.equal(query.attributes['server.port'], Number(database.port || 5432), query.name)
    }
  })
})
