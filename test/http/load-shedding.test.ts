// D16: load shedding. While the event loop is behind by more than the threshold, requests get
// 503 `unavailable` at once, with Retry-After and the Error body, and go no further; /healthz is
// still served; a threshold of 0 never sheds.
//
// The loop is held behind deterministically: this process, which also runs the server, spins
// for 100 ms in every loop iteration, so every delay sample is ~90 ms, far past the 50 ms
// threshold the server is given (sampled every 100 ms). Nothing here asserts how long anything
// took.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { memoryLog, WARN } from '../helpers/logs.ts'
import { parseExposition, sampleValue } from '../helpers/prometheus.ts'
import { createPet, errorOf, startServer, type TestServer } from '../helpers/server.ts'

/** Spins `chunkMs` in every event loop iteration of this process until stopped. */
function holdEventLoop(chunkMs: number) {
  let running = true
  let iterations = 0
  const spin = () => {
    if (!running) return
    const until = performance.now() + chunkMs
    while (performance.now() < until) {
      // busy on purpose: the event loop does nothing else meanwhile
    }
    iterations += 1
    setImmediate(spin)
  }
  setImmediate(spin)
  return {
    /** Resolves once `n` more busy iterations have passed, so that samples have seen them. */
    async after(n: number) {
      const target = iterations + n
      while (iterations < target) await new Promise((resolve) => setImmediate(resolve))
    },
    stop() {
      running = false
    },
  }
}

/** Runs `send` while the event loop is held behind, and stops holding it whatever happens. */
async function whileBehind<T>(send: () => Promise<T>): Promise<T> {
  const hold = holdEventLoop(100)
  try {
    await hold.after(3)
    return await send()
  } finally {
    hold.stop()
  }
}

const SHED_MESSAGE = /^load shedding: /
const ENDED_MESSAGE = /^load shedding ended/

describe('load shedding while the event loop is behind (D16)', () => {
  let server: TestServer
  const log = memoryLog()

  before(async () => {
    server = await startServer({
      // An episode ends for the log after 200 ms without shedding, not 5 s, so nothing waits.
      loadShedding: { maxEventLoopDelayMs: 50, quietMs: 200 },
      logger: { level: 'info', stream: log.stream },
      metrics: true,
    })
  })
  after(() => server.close())

  test('API requests and /readyz get 503 unavailable at once; /healthz is served', async () => {
    const [list, create, ready, health] = await whileBehind(() =>
      Promise.all([
        server.request('/v1/pets', { headers: { 'x-request-id': 'shed-list-1' } }),
        createPet(server, { name: 'Shed', categoryId: 1 }),
        fetch(`${server.url}/readyz`),
        fetch(`${server.url}/healthz`),
      ]),
    )

    assert.equal(list.status, 503)
    assert.equal(list.headers.get('retry-after'), '1')
    assert.equal(list.headers.get('x-request-id'), 'shed-list-1')
    assert.equal(list.headers.get('x-content-type-options'), 'nosniff')
    const body = await errorOf(list)
    assert.equal(body.code, 'unavailable')
    assert.match(body.message, /overloaded/)

    assert.equal(create.status, 503)
    assert.equal(create.headers.get('retry-after'), '1')
    assert.equal((await errorOf(create)).code, 'unavailable')

    assert.equal(ready.status, 503)
    assert.equal(ready.headers.get('retry-after'), '1')
    assert.equal((await errorOf(ready)).code, 'unavailable')

    assert.equal(health.status, 200)
    assert.deepEqual(await health.json(), { status: 'ok' })

    assert.ok(server.app.loadShedding.shed >= 3, `shed ${server.app.loadShedding.shed}`)
  })

  test('once the loop catches up, requests are served again; the shed create stored nothing', async () => {
    let list: Response | undefined
    for (let attempt = 0; attempt < 100; attempt++) {
      list = await server.request('/v1/pets')
      if (list.status !== 503) break
      await list.body?.cancel()
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    assert.equal(list?.status, 200)
    assert.deepEqual(await list?.json(), [])
    assert.equal(server.app.loadShedding.active, false)
  })

  test('the log says once that shedding began, and once how many it shed when it ended', async () => {
    // The requests the test had shed may fall in one episode or, on a busy machine where more
    // than the quiet spell passes between two of them, in several; the loop may also fall behind
    // at other times. Whatever the split, each episode has one line when it began and one when it
    // ended, and the ended lines account for every request shed.
    const ended = () => log.lines().filter((line) => ENDED_MESSAGE.test(line.msg ?? ''))
    const counted = () => ended().reduce((sum, line) => sum + Number(line.shedRequests), 0)
    for (let attempt = 0; attempt < 100 && counted() < server.app.loadShedding.shed; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    assert.ok(server.app.loadShedding.shed >= 3, 'the first test had requests shed')
    assert.equal(
      counted(),
      server.app.loadShedding.shed,
      'the ended lines count every request shed',
    )
    const lines = log.lines()
    let episodeStart = 0
    for (const [i, line] of lines.entries()) {
      if (!ENDED_MESSAGE.test(line.msg ?? '')) continue
      assert.ok(Number(line.shedRequests) >= 1, `shedRequests ${line.shedRequests}`)
      const began = lines
        .slice(episodeStart, i)
        .filter((candidate) => SHED_MESSAGE.test(candidate.msg ?? ''))
      assert.equal(began.length, 1, 'one line however many requests were shed')
      assert.equal(began[0]?.level, WARN)
      assert.equal(began[0]?.maxEventLoopDelayMs, 50)
      // The delay that started it; null when the loop did not even turn twice in a sample.
      const delay = began[0]?.eventLoopDelayMs
      assert.ok(delay === null || Number(delay) > 50, `eventLoopDelayMs ${delay}`)
      episodeStart = i + 1
    }
    // No request was logged as an error (no stack per shed request).
    assert.deepEqual(
      log.lines().filter((line) => line.level > WARN),
      [],
    )
  })

  test('petstore_load_shed_total is the number shed, each also timed as a 503 (D17)', async () => {
    assert.ok(server.metricsUrl !== undefined)
    const families = parseExposition(await (await fetch(server.metricsUrl)).text())
    const shed = server.app.loadShedding.shed
    assert.ok(shed >= 3)
    assert.equal(sampleValue(families, 'petstore_load_shed_total'), shed)
    const answered503 = (families.get('http_server_request_duration_seconds')?.samples ?? [])
      .filter((s) => s.name.endsWith('_count') && s.labels.http_response_status_code === '503')
      .reduce((sum, s) => sum + s.value, 0)
    assert.equal(answered503, shed)
  })
})

describe('PETSTORE_MAX_EVENT_LOOP_DELAY_MS=0: never sheds (D16)', () => {
  let server: TestServer
  before(async () => {
    server = await startServer({ loadShedding: { maxEventLoopDelayMs: 0 } })
  })
  after(() => server.close())

  test('API requests and /readyz are served however far behind the loop is', async () => {
    const [list, ready] = await whileBehind(() =>
      Promise.all([server.request('/v1/pets'), fetch(`${server.url}/readyz`)]),
    )
    assert.equal(list.status, 200)
    assert.deepEqual(await list.json(), [])
    assert.equal(ready.status, 200)
    assert.equal(server.app.loadShedding.shed, 0)
    assert.equal(server.app.loadShedding.active, false)
  })
})
