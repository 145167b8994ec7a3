// A fleet's short form: three instances on one PostgreSQL database behind HAProxy (docs/fleet.md's
// configuration, health-checking /readyz), under the load of SDK users who create, get and page
// for the whole test with the client's default retries and automatic idempotency keys. A rolling
// restart of every instance (SIGTERM, drain, started again on its port, as a deploy does), then
// a SIGKILL of one and its restart. What a fleet must hold: no call fails to its caller, every
// create the SDK acknowledged is stored as it was acknowledged, and each made exactly one pet.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, before, describe, test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { ErrorBodySchema } from '../../src/contract/schemas.ts'
import { checkStored, startUsers } from '../helpers/fleet-users.ts'
import { freePort } from '../helpers/free-port.ts'
import { type HAProxy, haproxyConfig, haproxySkipReason, startHAProxy } from '../helpers/haproxy.ts'
import { createTestDatabase, postgresSkipReason, type TestDatabase } from '../helpers/postgres.ts'
import { type ServiceProcess, startService } from '../helpers/process.ts'
import { sharedKey } from './support.ts'

const INSTANCES = 3
const USERS = 16
/** Each user's pause between rounds: 16 users still keep calls in flight at every moment. */
const THINK_MS = 20
/** Several health checks (every 250 ms; one success puts an instance back): HAProxy has seen a
 * restarted instance ready. */
const SETTLE_MS = 700

const skip = (await postgresSkipReason()) ?? haproxySkipReason()

test("docs/fleet.md's HAProxy configuration is the one this test runs", () => {
  const page = readFileSync(new URL('../../docs/fleet.md', import.meta.url), 'utf8')
  const block = /```haproxy\n([\s\S]*?)```/.exec(page)?.[1]
  const servers = [11, 12, 13].map((host, i) => ({
    name: `petstore${i + 1}`,
    address: `10.0.0.${host}:8080`,
  }))
  assert.equal(block, haproxyConfig(':8080', servers))
})

test("HAProxy's own 503, with no instance ready, is the interface's Error with Retry-After", {
  skip: haproxySkipReason(),
}, async () => {
  // A port nothing listens on: the one instance is never ready, so HAProxy answers itself.
  const balancer = await startHAProxy(
    [{ name: 'petstore1', address: `127.0.0.1:${await freePort()}` }],
    { instanceUp: false },
  )
  try {
    const response = await fetch(`${balancer.url}/v1/pets`)
    assert.equal(response.status, 503)
    assert.equal(response.headers.get('retry-after'), '1')
    assert.equal(response.headers.get('content-type'), 'application/json')
    const body = (await response.json()) as Record<string, unknown>
    assert.deepEqual(Object.keys(body).sort(), Object.keys(ErrorBodySchema.properties).sort())
    assert.equal(body.code, 'unavailable')
    assert.equal(body.status, 503)
  } finally {
    await balancer.stop()
  }
})

describe('a fleet of three behind HAProxy, under SDK load', { skip }, () => {
  let db: TestDatabase
  let balancer: HAProxy
  const services: ServiceProcess[] = []
  const ports: number[] = []
  const key = sharedKey()
  const start = (i: number) =>
    startService({
      DATABASE_URL: db.url,
      DATABASE_POOLER: db.pooler,
      PETSTORE_RATE_LIMIT: '0',
      PETSTORE_API_KEYS: key,
      PORT: String(ports[i]),
    })

  before(async () => {
    db = await createTestDatabase()
    for (let i = 0; i < INSTANCES; i++) ports.push(await freePort())
    for (let i = 0; i < INSTANCES; i++) services.push(await start(i))
    balancer = await startHAProxy(
      ports.map((port, i) => ({ name: `petstore${i + 1}`, address: `127.0.0.1:${port}` })),
    )
  })
  after(async () => {
    await Promise.all(services.map((s) => s.stop()))
    await balancer?.stop()
    await db?.drop()
  })

  test('a rolling restart and a SIGKILL: no call fails, one pet per acknowledged create', async () => {
    const users = startUsers({
      baseUrl: balancer.url,
      apiKey: key,
      users: USERS,
      prefix: 'fleet ',
      thinkMs: THINK_MS,
    })
    try {
      await delay(SETTLE_MS)
      for (let i = 0; i < INSTANCES; i++) {
        const code = await services[i]?.stop('SIGTERM')
        assert.equal(code, 0, `instance ${i + 1} drained and exited 0`)
        services[i] = await start(i)
        await delay(SETTLE_MS)
      }
      const killed = await services[1]?.stop('SIGKILL')
      assert.equal(killed, null, 'the SIGKILL ended the instance')
      services[1] = await start(1)
      await delay(SETTLE_MS)
    } finally {
      // The users stop whatever happened above, so that a failed step fails the test, not hangs it.
      await users.stop()
    }
    const run = await users.stop()

    const failures = run.calls.flatMap((c) => (c.failure === undefined ? [] : [c.failure]))
    assert.deepEqual(
      failures,
      [],
      `${failures.length} of ${run.calls.length} calls failed to their caller`,
    )
    assert.ok(run.acknowledged.length >= 50, `only ${run.acknowledged.length} creates were made`)
    const check = await checkStored(db.url, 'fleet ', run)
    assert.deepEqual(check.lost, [], 'acknowledged creates lost or stored otherwise')
    assert.deepEqual(check.twice, [], 'a logical create made more than one pet')
    assert.equal(check.unacknowledgedStored, 0, 'a pet no caller was told of was stored')
  })
})
