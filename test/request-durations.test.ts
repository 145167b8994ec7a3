// http_server_request_duration_seconds is counted by our own histogram (src/observability/request-durations.ts)
// for speed; what a scrape shows must be what prom-client's Histogram would show for the same
// observations, in one process and summed across cluster workers. It is also the shape test of
// what that module relies on in prom-client: that its registry reads our object as a metric.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { AggregatorRegistry, Histogram, Registry } from 'prom-client'
import { RequestDurations } from '../src/observability/request-durations.ts'
import { type Family, parseExposition } from './helpers/prometheus.ts'

const NAME = 'http_server_request_duration_seconds'
const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]

interface Observation {
  method: string
  route: string
  status: number
  seconds: number
}

const observation = fc.record({
  method: fc.constantFrom('GET', 'POST', 'HEAD', '_OTHER'),
  // The last needs escaping in the exposition (a quote and a backslash).
  route: fc.constantFrom('/v1/pets', '/v1/pets/{petId}', '', '/healthz', '/a"b\\c'),
  status: fc.constantFrom(200, 201, 304, 400, 404, 503),
  // Bucket bounds themselves too: `le` is "less than or equal".
  seconds: fc.oneof(fc.constantFrom(...BUCKETS, 0), fc.double({ min: 0, max: 20, noNaN: true })),
})

function ours(observations: Observation[]): Registry {
  const registry = new Registry()
  const durations = new RequestDurations({ name: NAME, help: 'h', buckets: BUCKETS, registry })
  for (const { method, route, status, seconds } of observations) {
    durations.observe(method, route, status, seconds)
  }
  return registry
}

function promClients(observations: Observation[]): Registry {
  const registry = new Registry()
  const histogram = new Histogram({
    name: NAME,
    help: 'h',
    labelNames: ['http_request_method', 'http_route', 'http_response_status_code'],
    buckets: BUCKETS,
    registers: [registry],
  })
  for (const { method, route, status, seconds } of observations) {
    histogram.observe(
      { http_request_method: method, http_route: route, http_response_status_code: String(status) },
      seconds,
    )
  }
  return registry
}

/** A family's samples keyed by name and labels (label order is the writer's choice). */
function samples(family: Family | undefined): Map<string, number> {
  assert.ok(family, 'src/observability/request-durations.ts: prom-client no longer exposes it')
  assert.equal(family.type, 'histogram')
  assert.equal(family.help, 'h')
  const byKey = new Map<string, number>()
  for (const { name, labels, value } of family.samples) {
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`
    assert.ok(!byKey.has(key), `${key} twice`)
    byKey.set(key, value)
  }
  return byKey
}

/** The same samples, to the bit: the sums add the same numbers in the same order. */
function assertSameSamples(actual: Map<string, number>, expected: Map<string, number>): void {
  assert.deepEqual(
    new Map([...actual].sort()),
    new Map([...expected].sort()),
    'src/observability/request-durations.ts no longer reads as prom-client reads its Histogram',
  )
}

test('a scrape shows what prom-client’s Histogram shows for the same observations', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(observation, { maxLength: 60 }), async (observations) => {
      const exposed = parseExposition(await ours(observations).metrics())
      const expected = parseExposition(await promClients(observations).metrics())
      // With no observation yet, both write the family's HELP and TYPE and no sample.
      assertSameSamples(samples(exposed.get(NAME)), samples(expected.get(NAME)))
    }),
    { numRuns: 200 },
  )
})

test('summed across cluster workers as prom-client sums its own histograms', async () => {
  const workers = [
    [{ method: 'GET', route: '/v1/pets', status: 200, seconds: 0.003 }],
    [
      { method: 'GET', route: '/v1/pets', status: 200, seconds: 0.2 },
      { method: 'POST', route: '/v1/pets', status: 201, seconds: 0.004 },
    ],
  ]
  const aggregate = async (registries: Registry[]) =>
    AggregatorRegistry.aggregate(
      await Promise.all(registries.map((registry) => registry.getMetricsAsJSON())),
    ).metrics()
  const exposed = parseExposition(await aggregate(workers.map(ours)))
  const expected = parseExposition(await aggregate(workers.map(promClients)))
  assertSameSamples(samples(exposed.get(NAME)), samples(expected.get(NAME)))
  assert.equal(
    samples(exposed.get(NAME)).get(
      `${NAME}_count${JSON.stringify([
        ['http_request_method', 'GET'],
        ['http_response_status_code', '200'],
        ['http_route', '/v1/pets'],
      ])}`,
    ),
    2,
    'both workers’ GETs are counted',
  )
})
