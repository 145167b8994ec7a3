// D20: /healthz and /readyz on a listener of their own (PROBE_PORT), answering what the API
// port's probes answer: alive; ready, or 503 with Retry-After while draining, while the store is
// unreachable and while requests are shed; nothing else is there.
import assert from 'node:assert/strict'
import { after, afterEach, before, describe, test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { readiness } from '../src/http/routes/health.ts'
import type { Lifecycle } from '../src/lifecycle.ts'
import { listenForProbes, type ProbeServer } from '../src/process/probe-server.ts'
import type { Store } from '../src/store/store.ts'
import { failingStore } from './helpers/failing-store.ts'
import { freePort } from './helpers/free-port.ts'
import { startService } from './helpers/process.ts'
import { openTestStore, type TestStore, tempDir } from './helpers/server.ts'

const quiet = { info() {}, error() {}, warn() {} }

describe('the probe listener', () => {
  let database: TestStore
  let probes: ProbeServer
  const lifecycle: Lifecycle = { draining: false }
  let pingFails = false
  let shedding = false

  before(async () => {
    database = await openTestStore()
    const real: Store = database.store
    const store = failingStore(real, {
      ping: async () => {
        if (pingFails) throw new Error('connect ECONNREFUSED 10.1.2.3:5432')
        await real.ping()
      },
    })
    probes = await listenForProbes(
      { port: 0, host: '127.0.0.1' },
      { ready: () => readiness(store, lifecycle, quiet), shedding: () => shedding },
      quiet,
      { ownSocketPerProcess: false },
    )
  })
  after(async () => {
    await probes.close()
    await database.close()
  })
  afterEach(() => {
    lifecycle.draining = false
    pingFails = false
    shedding = false
  })

  const get = (path: string, init: RequestInit = {}) => fetch(probes.origin + path, init)

  test('/healthz is alive and /readyz ready, as JSON, never cached', async () => {
    for (const [path, body] of [
      ['/healthz', { status: 'ok' }],
      ['/readyz', { status: 'ready' }],
    ] as const) {
      const response = await get(path)
      assert.equal(response.status, 200, path)
      assert.equal(response.headers.get('content-type'), 'application/json; charset=utf-8')
      assert.equal(response.headers.get('cache-control'), 'no-store')
      assert.deepEqual(await response.json(), body)
    }
  })

  test('HEAD answers without a body; another method is 405; another path 404', async () => {
    const head = await get('/readyz', { method: 'HEAD' })
    assert.equal(head.status, 200)
    assert.equal(await head.text(), '')
    const post = await get('/healthz', { method: 'POST' })
    assert.equal(post.status, 405)
    assert.equal(post.headers.get('allow'), 'GET, HEAD')
    await post.body?.cancel()
    for (const path of ['/', '/v1/pets', '/metrics', '/healthz/x']) {
      const response = await get(path)
      assert.equal(response.status, 404, path)
      await response.body?.cancel()
    }
  })

  test('/readyz is 503 with Retry-After while draining, the store is unreachable, or shedding; /healthz stays 200', async () => {
    const cases: [() => void, RegExp][] = [
      [() => (lifecycle.draining = true), /shutting down/],
      [() => (pingFails = true), /database/],
      [() => (shedding = true), /overloaded/],
    ]
    for (const [make, message] of cases) {
      lifecycle.draining = false
      pingFails = false
      shedding = false
      make()
      const ready = await get('/readyz')
      assert.equal(ready.status, 503, String(message))
      assert.ok(Number(ready.headers.get('retry-after')) >= 1)
      const body = (await ready.json()) as { code: string; message: string }
      assert.equal(body.code, 'unavailable')
      assert.match(body.message, message)
      assert.doesNotMatch(body.message, /ECONNREFUSED|10\.1\.2\.3/)
      const alive = await get('/healthz')
      assert.equal(alive.status, 200)
      await alive.body?.cancel()
    }
  })
})

describe('serve with PROBE_PORT', () => {
  test('a lone process and each of two workers answer the probes there, as on the API port', async () => {
    const dir = await tempDir()
    try {
      for (const args of [[], ['--workers', '2']]) {
        const probePort = await freePort()
        const service = await startService(
          {
            DATABASE_URL: `sqlite:${dir.path}/probes-${args.length}.db`,
            PROBE_PORT: String(probePort),
          },
          args,
        )
        try {
          for (const path of ['/healthz', '/readyz']) {
            const onApi = await fetch(service.url + path)
            const onProbes = await fetch(`http://127.0.0.1:${probePort}${path}`)
            assert.equal(onProbes.status, onApi.status, `${args} ${path}`)
            assert.deepEqual(await onProbes.json(), await onApi.json(), `${args} ${path}`)
          }
          const announced = () =>
            service
              .stdout()
              .split('\n')
              .filter((line) => line.includes('probes (/healthz, /readyz) listening at')).length
          // Under --workers each worker binds the port itself (SO_REUSEPORT) and says so.
          const expected = args.length === 0 || process.platform !== 'linux' ? 1 : 2
          for (let waited = 0; announced() < expected && waited < 10_000; waited += 50) {
            await delay(50)
          }
          assert.equal(announced(), expected, service.stdout())
        } finally {
          assert.equal(await service.stop('SIGTERM'), 0)
        }
      }
    } finally {
      await dir.remove()
    }
  })
})
