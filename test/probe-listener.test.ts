// D20: /healthz and /readyz on a listener of their own (PROBE_PORT), answering what the API
// port's probes answer: alive; ready, or 503 with Retry-After while draining, while the store is
// unreachable and while requests are shed; nothing else is there.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { connect } from 'node:net'
import { after, afterEach, before, describe, test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { readiness } from '../src/http/routes/health.ts'
import type { Lifecycle } from '../src/lifecycle.ts'
import { listenForProbes, type ProbeServer } from '../src/process/probe-server.ts'
import type { Store } from '../src/store/store.ts'
import { failingStore } from './helpers/failing-store.ts'
import { freePort } from './helpers/free-port.ts'
import { type ServiceProcess, startService } from './helpers/process.ts'
import { openTestStore, type TestStore, tempDir } from './helpers/server.ts'

const quiet = { info() {}, error() {}, warn() {} }
/** The readiness check's interval here: short, so that a test waits little for a change. */
const READINESS_INTERVAL_MS = 50

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
      {
        ready: () => readiness(store, lifecycle, quiet),
        shedding: () => shedding,
        draining: () => lifecycle.draining,
      },
      quiet,
      { ownSocketPerProcess: false, stallMs: 10_000, readinessIntervalMs: READINESS_INTERVAL_MS },
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

  /** The first answer of `path` with `status`, asked every few ms; fails after two seconds. */
  async function answered(path: string, status: number): Promise<Response> {
    for (let waited = 0; ; waited += 10) {
      const response = await get(path)
      if (response.status === status || waited > 2_000) return response
      await response.body?.cancel()
      await delay(10)
    }
  }

  test('/healthz is alive and /readyz ready, as JSON, never cached', async () => {
    for (const [path, body] of [
      ['/healthz', { status: 'ok' }],
      ['/readyz', { status: 'ready' }],
    ] as const) {
      const response = await answered(path, 200)
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
      assert.equal((await answered('/readyz', 200)).status, 200, 'ready again first')
      make()
      // Draining and shedding at the next heartbeat, the store at the next check.
      const ready = await answered('/readyz', 503)
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

describe('the probe thread reports a stuck event loop, and its recovery', () => {
  // The test's own loop is the API's here: it is held by a synchronous wait (Atomics.wait, as a
  // stuck loop would be) while another process probes every 50 ms and writes what it got. The
  // prober says "first" at its first 200, and probes on for forMs from then.
  const PROBER = `
    const [origin, forMs] = process.argv.slice(1)
    for (;;) {
      try {
        if ((await fetch(origin + '/healthz')).status === 200) break
      } catch {}
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    console.log('first')
    const started = Date.now()
    const results = []
    while (Date.now() - started < Number(forMs)) {
      const at = Date.now()
      try {
        const response = await fetch(origin + '/healthz', { signal: AbortSignal.timeout(1000) })
        results.push([at, response.status, Date.now() - at])
      } catch { results.push([at, 0, Date.now() - at]) }
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    console.log(JSON.stringify(results))`

  test('/healthz: 200 while the loop turns, 503 once stuck past the stall time, 200 again after', async () => {
    const STALL_MS = 500
    const probes = await listenForProbes(
      { port: 0, host: '127.0.0.1' },
      {
        ready: async () => ({ statusCode: 200, body: { status: 'ready' } }),
        shedding: () => false,
        draining: () => false,
      },
      quiet,
      { ownSocketPerProcess: false, stallMs: STALL_MS },
    )
    try {
      const prober = spawn(
        process.execPath,
        ['--input-type=module', '-e', PROBER, probes.origin, '3000'],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      )
      let output = ''
      prober.stdout.on('data', (chunk) => {
        output += chunk
      })
      while (!output.includes('first')) await delay(20)
      await delay(200)
      // Stuck for twice the stall time: no timer, no I/O of this thread runs meanwhile.
      const stuckAt = Date.now()
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2 * STALL_MS + 300)
      const stuckFor = Date.now() - stuckAt
      await once(prober, 'exit')
      const results = JSON.parse(output.slice(output.indexOf('['))) as [number, number, number][]
      assert.ok(
        results.every(([, status]) => status === 200 || status === 503),
        output,
      )
      assert.ok(
        results.every(([, , took]) => took < 1_000),
        `every probe answered: ${output}`,
      )
      const firstStalled = results.find(([, status]) => status === 503)
      assert.ok(firstStalled, `a 503 while stuck for ${stuckFor} ms: ${output}`)
      // Within the stall time of the wait's start, plus a probe's interval and a heartbeat's
      // (the loop's last turn came at most one heartbeat before the wait), with room for a
      // loaded machine's scheduling.
      assert.ok(
        firstStalled[0] - stuckAt <= STALL_MS + 400,
        `503 from ${firstStalled[0] - stuckAt} ms into the wait: ${output}`,
      )
      const last = results.at(-1)
      assert.equal(last?.[1], 200, `alive again once the loop turns: ${output}`)
      assert.equal(results[0]?.[1], 200, `alive before: ${output}`)
    } finally {
      await probes.close()
    }
  })
})

/**
 * Waits until `service`'s probe threads listen on `probePort` and say ready, then checks that
 * they answer as the API's port does; `workers` is how many (--workers).
 */
async function answersAsOnApi(
  service: ServiceProcess,
  probePort: number,
  what: string,
  workers: number,
): Promise<void> {
  const announced = () =>
    service
      .stdout()
      .split('\n')
      .filter((line) => line.includes('probes (/healthz, /readyz) listening at')).length
  // Under --workers each worker binds the port itself (SO_REUSEPORT) and says so, then
  // checks its readiness: waited for first, so that no worker is still starting below.
  const expected = workers === 0 || process.platform !== 'linux' ? 1 : workers
  for (let waited = 0; announced() < expected && waited < 20_000; waited += 50) {
    await delay(50)
  }
  assert.equal(announced(), expected, service.stdout())
  // Each thread says ready once its readiness check has run. The kernel spreads new
  // connections over the workers by a hash, so a few probes in a row can all reach one:
  // 16 in a row answered 200 leave a 2^-15 chance of one worker not yet asked.
  let ready = false
  for (let waited = 0; !ready && waited < 10_000; waited += 50) {
    const answers = await Promise.all(
      Array.from({ length: 16 }, async () => {
        const response = await fetch(`http://127.0.0.1:${probePort}/readyz`)
        await response.arrayBuffer()
        return response.status
      }),
    )
    ready = answers.every((status) => status === 200)
    if (!ready) await delay(50)
  }
  assert.ok(ready, `${what}: every probe thread ready`)
  for (const path of ['/healthz', '/readyz']) {
    const onApi = await fetch(service.url + path)
    const onProbes = await fetch(`http://127.0.0.1:${probePort}${path}`)
    assert.equal(onProbes.status, onApi.status, `${what} ${path}`)
    assert.deepEqual(await onProbes.json(), await onApi.json(), `${what} ${path}`)
  }
}

describe('serve with PROBE_PORT', () => {
  // One lone process answers the first test's probes, then drains in the second: a start costs
  // most of a second of CPU, and the drain asks nothing more of it than PROBE_PORT and a key.
  let dir: Awaited<ReturnType<typeof tempDir>>
  let probePort: number
  let lone: ServiceProcess
  before(async () => {
    dir = await tempDir()
    probePort = await freePort()
    lone = await startService({
      DATABASE_URL: `sqlite:${dir.path}/probes.db`,
      PROBE_PORT: String(probePort),
      PETSTORE_API_KEYS: 'k'.repeat(40),
    })
  })
  after(async () => {
    await lone?.stop('SIGKILL')
    await dir?.remove()
  })

  test('a lone process and each of two workers answer the probes there, as on the API port', async () => {
    await answersAsOnApi(lone, probePort, 'a lone process', 0)
    const workersPort = await freePort()
    const service = await startService(
      {
        DATABASE_URL: `sqlite:${dir.path}/probes-workers.db`,
        PROBE_PORT: String(workersPort),
      },
      ['--workers', '2'],
    )
    try {
      await answersAsOnApi(service, workersPort, '--workers 2', 2)
    } finally {
      assert.equal(await service.stop('SIGTERM'), 0)
    }
  })

  // The lone process of the test before: its SIGTERM ends it.
  test('SIGTERM: /readyz there says 503 shutting down while a request still drains, /healthz 200', async () => {
    const service = lone
    const probe = (path: string) => fetch(`http://127.0.0.1:${probePort}${path}`)
    // Ready once the first check after the API's port listens has run.
    for (let waited = 0; waited < 5_000; waited += 20) {
      const first = await probe('/readyz')
      await first.body?.cancel()
      if (first.status === 200) break
      await delay(20)
    }
    assert.equal((await probe('/readyz')).status, 200)
    // A create whose body has not all arrived: the drain waits for it.
    const { port } = new URL(service.url)
    const socket = connect(Number(port), '127.0.0.1')
    await once(socket, 'connect')
    const body = JSON.stringify({ name: 'Rex', categoryId: 1 })
    socket.write(
      `POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${'k'.repeat(40)}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
    )
    await delay(100)
    service.child.kill('SIGTERM')
    let ready: Response | undefined
    for (let waited = 0; waited < 2_000; waited += 10) {
      ready = await probe('/readyz')
      if (ready.status === 503) break
      await ready.body?.cancel()
      await delay(10)
    }
    assert.equal(ready?.status, 503)
    const said = (await ready?.json()) as { message: string } | undefined
    assert.match(said?.message ?? '', /shutting down/)
    assert.equal((await probe('/healthz')).status, 200, 'alive while it drains')
    socket.end(body.slice(5))
    assert.equal(await service.exited, 0)
    // Closed whole: the store too, after the probe thread (not a process that ran out of work).
    assert.match(service.stdout(), /shut down cleanly/)
  })
})
