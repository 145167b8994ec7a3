// A fleet's short form: three instances on one PostgreSQL database behind HAProxy (the README's
// configuration, health-checking /readyz), under the load of SDK users who create, get and page
// for the whole test with the client's default retries and automatic idempotency keys. A rolling
// restart of every instance (SIGTERM, drain, started again on its port, as a deploy does), then
// a SIGKILL of one and its restart. What a fleet must hold: no call fails to its caller, every
// create the SDK acknowledged is stored as it was acknowledged, and each made exactly one pet.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, before, describe, test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { type Pet, Petstore } from '../../client/src/index.ts'
import { freePort } from '../helpers/free-port.ts'
import { type HAProxy, haproxyConfig, haproxySkipReason, startHAProxy } from '../helpers/haproxy.ts'
import {
  createTestDatabase,
  onDatabase,
  postgresSkipReason,
  type TestDatabase,
} from '../helpers/postgres.ts'
import { type ServiceProcess, startService } from '../helpers/process.ts'
import { sharedKey } from './support.ts'

const INSTANCES = 3
const USERS = 16
/** Several health checks (every 250 ms; one success puts an instance back): HAProxy has seen a
 * restarted instance ready. */
const SETTLE_MS = 700

const skip = (await postgresSkipReason()) ?? haproxySkipReason()

interface Load {
  /** Ends the users' loops and resolves with what they saw. */
  stop(): Promise<{ acknowledged: Pet[]; failures: string[]; calls: number }>
}

/** `USERS` SDK users, each creating a pet, reading it back and paging, until stopped. */
function startLoad(baseUrl: string, apiKey: string): Load {
  const petstore = new Petstore({ baseUrl: `${baseUrl}/v1`, apiKey })
  const acknowledged: Pet[] = []
  const failures: string[] = []
  let calls = 0
  let running = true
  const user = async (u: number) => {
    for (let n = 0; running; n++) {
      const name = `fleet ${u}-${n}`
      try {
        calls++
        const pet = await petstore.pets.create({ name, categoryId: u + 1 })
        acknowledged.push(pet)
        calls++
        assert.deepEqual(await petstore.pets.get(pet.id), pet)
        calls++
        await petstore.pets.listPage({ limit: 5 })
      } catch (err) {
        failures.push(`${name}: ${err instanceof Error ? err.message : String(err)}`)
      }
    }
  }
  const users = Promise.all(Array.from({ length: USERS }, (_, u) => user(u)))
  return {
    async stop() {
      running = false
      await users
      return { acknowledged, failures, calls }
    },
  }
}

test("README's HAProxy configuration is the one this test runs", () => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8')
  const block = /### Running a fleet[\s\S]*?```haproxy\n([\s\S]*?)```/.exec(readme)?.[1]
  const servers = [11, 12, 13].map((host, i) => ({
    name: `petstore${i + 1}`,
    address: `10.0.0.${host}:8080`,
  }))
  assert.equal(block, haproxyConfig(':8080', servers))
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
    const load = startLoad(balancer.url, key)
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
      await load.stop()
    }
    const { acknowledged, failures, calls } = await load.stop()

    assert.deepEqual(failures, [], `${failures.length} of ${calls} calls failed to their caller`)
    assert.ok(acknowledged.length >= 50, `only ${acknowledged.length} creates were made`)
    const stored = await onDatabase(db.url, async (client) => {
      const { rows } = await client.query<{ id: number; name: string; category_id: number }>(
        `SELECT id::float8 AS id, name, category_id::float8 AS category_id FROM pets WHERE name LIKE 'fleet %'`,
      )
      return rows
    })
    const byName = new Map<string, number>()
    for (const row of stored) byName.set(row.name, (byName.get(row.name) ?? 0) + 1)
    const twice = [...byName].filter(([, count]) => count > 1)
    assert.deepEqual(twice, [], 'a logical create made more than one pet')
    const storedById = new Map(stored.map((row) => [row.id, row]))
    for (const pet of acknowledged) {
      const row = storedById.get(pet.id)
      assert.ok(row !== undefined, `acknowledged pet ${pet.id} (${pet.name}) was lost`)
      assert.deepEqual(
        { name: row.name, categoryId: row.category_id },
        {
          name: pet.name,
          categoryId: pet.categoryId,
        },
      )
    }
    assert.equal(stored.length, acknowledged.length, 'a pet no caller was told of was stored')
  })
})
