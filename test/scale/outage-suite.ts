// The outage suite of the scale tests (issue 3), run straight to PostgreSQL (outage.test.ts) and
// with PostgreSQL behind a transaction-mode PgBouncer (pgbouncer-outage.test.ts, D19). A TCP
// proxy the test controls sits in front of PostgreSQL. While the database is away, every request
// is answered 503 `unavailable` (an Error body, no internals) within the store's timeouts, and
// /readyz is 503; once it is back both recover without a restart, and every pet that was
// acknowledged with a 201 is still there. Every request is answered: `call` gives up past
// REQUEST_DEADLINE_MS, which fails the test, so a hang cannot pass.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { logLines } from '../helpers/logs.ts'
import { type PgBouncer, startPgBouncer } from '../helpers/pgbouncer.ts'
import { ADMIN_URL, createTestDatabase, type TestDatabase } from '../helpers/postgres.ts'
import { type ServiceProcess, startService } from '../helpers/process.ts'
import { type ProxyMode, startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts'
import { boundedPool, call, type Pet, sharedKey, walk } from './support.ts'

// What the store's timeouts allow at most: a 2 s connect plus a 6 s query, and some slack.
const ANSWER_WITHIN_MS = 10_000
const LOAD_WORKERS = 20
const INTERNALS = [/ECONNREFUSED|ECONNRESET|terminated|timeout/i, /127\.0\.0\.1|5432/, /postgres/i]

interface Outcome {
  status: number
  body: unknown
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * How the service reaches PostgreSQL through the proxy: `direct`, or `pgbouncer` (D19), a
 * transaction-mode PgBouncer in front of the proxy, so that it is PostgreSQL behind the pooler
 * that goes away while the pooler itself stays up.
 */
export type Route = 'direct' | 'pgbouncer'

export function outageSuite(title: string, route: Route, skip: string | undefined): void {
  describe(title, { skip }, () => {
    let db: TestDatabase
    let proxy: TcpProxy
    let bouncer: PgBouncer | undefined
    let service: ServiceProcess
    const key = sharedKey()
    const acknowledged: Pet[] = []
    const outcomes: Outcome[] = []
    let loading = false
    let load: Promise<unknown> = Promise.resolve()

    async function answer(path: string, init?: RequestInit): Promise<Outcome> {
      const response = await call(service.url, key, path, init)
      const outcome = { status: response.status, body: await response.json() }
      outcomes.push(outcome)
      return outcome
    }

    /** Creates, from LOAD_WORKERS workers at once, until stopped; keeps every 201's pet. */
    function startLoad(): void {
      loading = true
      let n = 0
      const worker = async () => {
        while (loading) {
          const outcome = await answer('/v1/pets', {
            method: 'POST',
            body: JSON.stringify({ name: `load ${n++}`, categoryId: 1 }),
          })
          if (outcome.status === 201) acknowledged.push(outcome.body as Pet)
          else await sleep(20)
        }
      }
      load = Promise.all(Array.from({ length: LOAD_WORKERS }, worker))
    }

    async function until(what: string, check: () => boolean | Promise<boolean>, withinMs: number) {
      const deadline = Date.now() + withinMs
      while (!(await check())) {
        assert.ok(Date.now() < deadline, `${what}: not within ${withinMs} ms`)
        await sleep(100)
      }
    }

    const readyStatus = async () => (await answer('/readyz')).status

    /** Takes the database away in `mode`, checks the service says so, and brings it back. */
    async function outage(mode: ProxyMode): Promise<void> {
      await until('load before the outage', () => acknowledged.length >= 50, 10_000)
      const before = outcomes.filter((o) => o.status === 503).length
      await proxy.setMode(mode)
      await until('/readyz turns 503', async () => (await readyStatus()) === 503, ANSWER_WITHIN_MS)
      for (const [path, init] of [
        ['/v1/pets', undefined],
        ['/v1/pets/1', undefined],
        ['/v1/pets', { method: 'POST', body: JSON.stringify({ name: 'down', categoryId: 1 }) }],
      ] as const) {
        const outcome = await answer(path, init)
        assert.equal(
          outcome.status,
          503,
          `${init?.method ?? 'GET'} ${path} while the database is away`,
        )
      }
      assert.ok(outcomes.filter((o) => o.status === 503).length > before)

      const acknowledgedBefore = acknowledged.length
      await proxy.setMode('forward')
      await until('/readyz recovers', async () => (await readyStatus()) === 200, 15_000)
      await until(
        'creates succeed again',
        () => acknowledged.length >= acknowledgedBefore + 50,
        10_000,
      )
    }

    before(async () => {
      db = await createTestDatabase()
      const admin = new URL(ADMIN_URL)
      proxy = await startTcpProxy({ host: admin.hostname, port: Number(admin.port || 5432) })
      const url = new URL(db.url)
      url.hostname = '127.0.0.1'
      url.port = String(proxy.port)
      if (route === 'pgbouncer') {
        // Fewer server connections than the service's pool of 10.
        bouncer = await startPgBouncer({
          poolSize: 3,
          upstream: { host: '127.0.0.1', port: proxy.port },
        })
      }
      service = await startService({
        DATABASE_URL: bouncer ? bouncer.through(db.url) : url.toString(),
        DATABASE_POOLER: bouncer ? 'transaction' : 'none',
        PETSTORE_RATE_LIMIT: '0',
        PETSTORE_API_KEYS: key,
      })
      startLoad()
    })
    after(async () => {
      loading = false
      await load.catch(() => {})
      await service?.stop()
      await bouncer?.stop()
      await proxy?.close()
      await db?.drop()
    })

    test('connections dropped and refused: 503s at once, then recovery by itself', async () => {
      await outage('refuse')
    })

    test('a silent network (nothing answers): 503s after the timeouts, never a hang', async () => {
      await outage('stall')
    })

    test('every request was answered: a 201/200, or a 503 Error body without internals', async () => {
      loading = false
      await load
      const unavailable = outcomes.filter((o) => o.status === 503)
      assert.ok(unavailable.length > 0)
      for (const outcome of outcomes) {
        assert.ok([200, 201, 503].includes(outcome.status), `answered ${outcome.status}`)
      }
      for (const { body } of unavailable) {
        const error = body as { code: string; message: string; status: number }
        assert.equal(error.code, 'unavailable')
        assert.equal(error.status, 503)
        for (const leak of INTERNALS) assert.doesNotMatch(error.message, leak)
      }
    })

    test('the log says the outage once as it starts and once as it ends, not per request', () => {
      const lines = logLines(service.stdout())
      const database = lines.filter((line) => /^the database/.test(line.msg ?? ''))
      const started = database.filter((line) => /fails/.test(line.msg ?? ''))
      const ended = database.filter((line) => /works again/.test(line.msg ?? ''))
      // Two outages: the second, within a minute of the first, may fold into its lines.
      assert.ok(started.length >= 1 && started.length <= 2, JSON.stringify(database))
      assert.ok(ended.length >= 1 && ended.length <= 2, JSON.stringify(database))
      assert.equal(started[0]?.reason, 'the database is unreachable')
      assert.ok(started[0]?.err, 'the first line carries the cause')
      assert.equal(
        lines.filter((line) => line.msg === 'request failed').length,
        0,
        'no line per failed request',
      )
    })

    test('no acknowledged pet was lost', async () => {
      assert.ok(acknowledged.length >= 150)
      const listed = new Map(
        (await walk([service.url], key, '/v1/pets?limit=100')).map((p) => [p.id, p]),
      )
      for (const pet of acknowledged)
        assert.deepEqual(listed.get(pet.id), pet, `pet ${pet.id} lost`)
      const { results } = await boundedPool(acknowledged.length, 50, async (i) => {
        const pet = acknowledged[i] as Pet
        const response = await call(service.url, key, `/v1/pets/${pet.id}`)
        return { expected: pet, status: response.status, got: await response.json() }
      })
      for (const { expected, status, got } of results) {
        assert.equal(status, 200)
        assert.deepEqual(got, expected)
      }
    })
  })
}
