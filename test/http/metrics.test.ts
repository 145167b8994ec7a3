// D17: Prometheus metrics on a listener of their own. Every scrape is read with a strict parser
// of the exposition format (helpers/prometheus.ts), and the figures move by exactly what the
// test sent.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { type Family, parseExposition, sampleValue } from '../helpers/prometheus.ts'
import {
  createPet,
  errorOf,
  ManualClock,
  startServer,
  TEST_ENGINE,
  type TestServer,
} from '../helpers/server.ts'

const DURATION = 'http_server_request_duration_seconds'

async function scrape(server: TestServer): Promise<Map<string, Family>> {
  assert.ok(server.metricsUrl !== undefined)
  const response = await fetch(server.metricsUrl)
  assert.equal(response.status, 200)
  assert.match(response.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/)
  return parseExposition(await response.text())
}

function requests(families: Map<string, Family>, labels: Record<string, string>): number {
  return sampleValue(families, `${DURATION}_count`, labels)
}

describe('GET /metrics on the metrics listener (D17)', () => {
  let server: TestServer
  before(async () => {
    server = await startServer({ metrics: true })
  })
  after(() => server.close())

  test('parses as the text exposition format, with our families and the process metrics', async () => {
    const families = await scrape(server)
    const expected: [string, string][] = [
      [DURATION, 'histogram'],
      ['petstore_pets_created_total', 'counter'],
      ['petstore_store_commit_duration_seconds', 'histogram'],
      ['petstore_store_commit_batch_size', 'histogram'],
      ['petstore_idempotent_replays_total', 'counter'],
      ['petstore_rate_limited_total', 'counter'],
      ['petstore_rate_limit_fail_open', 'gauge'],
      ['petstore_load_shed_total', 'counter'],
      ['petstore_store_unavailable', 'gauge'],
      ['petstore_memory_limit_bytes', 'gauge'],
      ['petstore_heap_size_limit_bytes', 'gauge'],
      // prom-client's defaults: CPU, memory, event-loop lag, GC.
      ['process_cpu_user_seconds_total', 'counter'],
      ['process_resident_memory_bytes', 'gauge'],
      ['nodejs_eventloop_lag_seconds', 'gauge'],
      ['nodejs_gc_duration_seconds', 'histogram'],
    ]
    for (const [name, type] of expected) {
      assert.equal(families.get(name)?.type, type, name)
      assert.ok((families.get(name)?.help ?? '') !== '', `${name} has HELP`)
    }
    const pool = families.has('petstore_db_pool_connections_in_use')
    assert.equal(pool, TEST_ENGINE === 'postgres', 'pool gauges exactly when there is a pool')
  })

  test('N listPets add exactly N to that route’s histogram count, labelled by template', async () => {
    const labels = {
      http_request_method: 'GET',
      http_route: '/v1/pets',
      http_response_status_code: '200',
    }
    const before = requests(await scrape(server), labels)
    const n = 7
    for (let i = 0; i < n; i++) {
      const response = await server.request('/v1/pets?limit=5')
      assert.equal(response.status, 200)
      await response.arrayBuffer()
    }
    const families = await scrape(server)
    assert.equal(requests(families, labels) - before, n)
    // The sum is seconds: positive, and less than a second a request here.
    const sum = sampleValue(families, `${DURATION}_sum`, labels)
    assert.ok(sum > 0 && sum < n, `sum ${sum}`)

    const missing = await server.request('/v1/pets/987654321')
    assert.equal(missing.status, 404)
    await missing.arrayBuffer()
    assert.equal(
      requests(await scrape(server), {
        http_request_method: 'GET',
        http_route: '/v1/pets/{petId}',
        http_response_status_code: '404',
      }),
      1,
    )
  })

  test('N creates add exactly N pets created, in commits whose batch sizes sum to N', async () => {
    const families = await scrape(server)
    const created = sampleValue(families, 'petstore_pets_created_total')
    const batchSum = sampleValue(families, 'petstore_store_commit_batch_size_sum')
    const commits = sampleValue(families, 'petstore_store_commit_duration_seconds_count')
    const n = 12
    // Concurrent, so that SQLite commits several in one batch.
    const responses = await Promise.all(
      Array.from({ length: n }, (_, i) => createPet(server, { name: `M${i}`, categoryId: 1 })),
    )
    for (const response of responses) assert.equal(response.status, 201)
    const after = await scrape(server)
    assert.equal(sampleValue(after, 'petstore_pets_created_total') - created, n)
    assert.equal(sampleValue(after, 'petstore_store_commit_batch_size_sum') - batchSum, n)
    const newCommits = sampleValue(after, 'petstore_store_commit_duration_seconds_count') - commits
    assert.ok(newCommits >= 1 && newCommits <= n, `${newCommits} commits`)
    assert.equal(
      sampleValue(after, 'petstore_store_commit_batch_size_count'),
      sampleValue(after, 'petstore_store_commit_duration_seconds_count'),
    )
    // A refused create commits nothing.
    const refused = await createPet(server, { name: '', categoryId: 1 })
    assert.equal(refused.status, 400)
    await refused.arrayBuffer()
    const last = await scrape(server)
    assert.equal(sampleValue(last, 'petstore_pets_created_total') - created, n)
    assert.equal(
      requests(last, {
        http_request_method: 'POST',
        http_route: '/v1/pets',
        http_response_status_code: '400',
      }),
      1,
    )
  })

  test('creates with one Idempotency-Key: one pet created, the repeats counted as replays (D14)', async () => {
    const families = await scrape(server)
    const created = sampleValue(families, 'petstore_pets_created_total')
    const replays = sampleValue(families, 'petstore_idempotent_replays_total')
    const key = `metrics-${Date.now()}`
    // One after another, so that each repeat finds the committed record.
    for (let i = 0; i < 3; i++) {
      const response = await createPet(
        server,
        { name: 'Replayed', categoryId: 1 },
        { headers: { 'idempotency-key': key } },
      )
      assert.equal(response.status, 201)
      await response.arrayBuffer()
    }
    const after = await scrape(server)
    assert.equal(sampleValue(after, 'petstore_pets_created_total') - created, 1)
    assert.equal(sampleValue(after, 'petstore_idempotent_replays_total') - replays, 2)
  })

  test('paths no route matches share one label value: a scanner adds no series', async () => {
    const probe = (path: string, method = 'GET') =>
      server.request(path, { method, headers: { authorization: '' } }).then((r) => r.arrayBuffer())
    await probe('/first-unknown')
    const before = await scrape(server)
    const seriesBefore = before.get(DURATION)?.samples.length
    const unmatched = { http_route: '', http_response_status_code: '404' }
    const countBefore = requests(before, { ...unmatched, http_request_method: 'GET' })
    for (let i = 0; i < 25; i++) await probe(`/wp-admin/${i}/setup.php?x=${i}`)
    await probe('/v1/pets/1/../../etc/passwd')
    await probe('/.env')
    const after = await scrape(server)
    assert.equal(after.get(DURATION)?.samples.length, seriesBefore, 'no new series')
    assert.equal(requests(after, { ...unmatched, http_request_method: 'GET' }) - countBefore, 27)
    const routes = new Set(after.get(DURATION)?.samples.map((s) => s.labels.http_route))
    for (const route of routes) {
      assert.ok(['', '/v1/pets', '/v1/pets/{petId}'].includes(route ?? ''), `route ${route}`)
    }
  })

  test('the metrics are not on the API port, and the metrics listener serves nothing else', async () => {
    assert.ok(server.metricsUrl !== undefined)
    const metrics = new URL(server.metricsUrl)
    assert.notEqual(metrics.port, new URL(server.url).port)
    assert.equal(metrics.pathname, '/metrics')

    const onApi = await fetch(`${server.url}/metrics`)
    assert.equal(onApi.status, 404)
    assert.equal((await errorOf(onApi)).code, 'not_found')

    for (const path of ['/v1/pets', '/', '/metrics/', '/healthz']) {
      const response = await fetch(new URL(path, metrics))
      assert.equal(response.status, 404, path)
      await response.arrayBuffer()
    }
    const post = await fetch(metrics, { method: 'POST' })
    assert.equal(post.status, 405)
    assert.equal(post.headers.get('allow'), 'GET, HEAD')
    await post.arrayBuffer()
  })
})

describe('petstore_rate_limited_total (D17)', () => {
  let server: TestServer
  // D12's windows follow the app's clock: a clock that stands still keeps the five requests in
  // one window (on the system clock they could straddle a minute's end, and the 4th pass).
  const clock = new ManualClock(Date.UTC(2027, 0, 1, 0, 0, 30))
  before(async () => {
    server = await startServer({ metrics: true, rateLimit: 3, clock })
  })
  after(() => server.close())

  test('counts exactly the requests refused 429', async () => {
    for (let i = 0; i < 5; i++) {
      const response = await server.request('/v1/pets')
      assert.equal(response.status, i < 3 ? 200 : 429)
      await response.arrayBuffer()
    }
    const families = await scrape(server)
    assert.equal(sampleValue(families, 'petstore_rate_limited_total'), 2)
    assert.equal(sampleValue(families, 'petstore_rate_limit_fail_open'), 0)
    assert.equal(
      requests(families, {
        http_request_method: 'GET',
        http_route: '/v1/pets',
        http_response_status_code: '429',
      }),
      2,
    )
  })
})

describe('the exposition reader these tests use is strict', () => {
  test('it refuses what Prometheus refuses', () => {
    const good = '# HELP a_total A.\n# TYPE a_total counter\na_total{x="1"} 3\n'
    assert.equal(sampleValue(parseExposition(good), 'a_total', { x: '1' }), 3)
    for (const bad of [
      'a_total 3', // no final newline
      'a total 3\n',
      'a_total{x=1} 3\n',
      'a_total{x="1} 3\n',
      'a_total{1x="1"} 3\n',
      'a_total three\n',
      'a_total{x="1"} 3\na_total{x="1"} 4\n',
      'a 1\nb 1\na{x="2"} 1\n',
      'a 1\n# TYPE a counter\n',
      '# TYPE h histogram\nh_bucket{le="1"} 2\nh_count 2\n',
      '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_count 1\n',
      '# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_count 3\n',
    ]) {
      assert.throws(() => parseExposition(bad), Error, JSON.stringify(bad))
    }
  })
})
