// D17: the figures Prometheus scrapes, with prom-client. One Registry per app, built here and
// handed to buildApp (tests build their own). The parts that produce figures never import
// prom-client: the store reports through StoreObserver, the rate limiter through
// RateLimitObserver, load shedding keeps counters (`app.loadShedding`) read at each scrape.
//
// Names follow the OpenTelemetry HTTP semantic conventions as Prometheus writes them
// (`http.server.request.duration` in seconds → http_server_request_duration_seconds); ours are
// prefixed `petstore_`.

import { getHeapStatistics } from 'node:v8'
import {
  AggregatorRegistry,
  Counter,
  collectDefaultMetrics,
  Gauge,
  Histogram,
  Registry,
} from 'prom-client'
import type { CounterHealth } from '../rate-limit/auth-failures.ts'
import type { KeyLookupObserver, PoolStats, StoreObserver } from '../store/store.ts'
import type { Scrape } from './metrics-server.ts'
import { RequestDurations } from './request-durations.ts'

/** OTel's advised buckets for http.server.request.duration, in seconds. */
const REQUEST_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]
/** A commit is one fsync (SQLite) or one round trip and a WAL flush (PostgreSQL). */
const COMMIT_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]
/** Creates per group commit: 1 when idle, hundreds under load. */
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]

/** What the rate limiter reports (plugins/rate-limit.ts). */
export interface RateLimitObserver {
  /** A request was refused 429. */
  limited(): void
  /** The counter failed (true: requests go through unlimited) or answered again (false). */
  failingOpen(failing: boolean): void
}

/** What the failed-authentication limit reports (plugins/auth.ts, auth-failures.ts, D3). */
export interface AuthFailureObserver extends CounterHealth {
  /** A request from an address over its limit was refused 429. */
  refused(): void
}

/** D29: what staging did (plugins/staging.ts): a rehearsal asked for with Prefer, or a fault. */
export interface StagingObserver {
  /** `answer`: the status given, or `delay` for an answer held. */
  answered(kind: 'prefer' | 'fault', answer: string): void
}

export interface Metrics {
  readonly registry: Registry
  readonly store: StoreObserver
  readonly rateLimit: RateLimitObserver
  readonly authFailures: AuthFailureObserver
  /** D3: each question about a key's hash the store was asked (keys/verifier.ts). */
  readonly keyLookups: KeyLookupObserver
  /** One finished request: its labels as observed, its duration in seconds. */
  request(method: string, route: string, status: number, seconds: number): void
  /** Load shedding's running count (plugins/load-shedding.ts), read at each scrape. */
  loadShedFrom(count: () => number): void
  /**
   * Whether the process would answer /readyz 200 now (routes/health.ts), asked at each scrape;
   * once, after the store is observed.
   */
  readinessFrom(ready: () => Promise<boolean>): void
  /** A createPet answered from its Idempotency-Key's record (D14). */
  replayed(): void
  readonly staging: StagingObserver
}

export interface MetricsOptions {
  /** Default: a new one. */
  registry?: Registry
  /** prom-client's process metrics (CPU, memory, event-loop lag, GC); default true. */
  processMetrics?: boolean
}

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = options.registry ?? new Registry()
  const registers = [registry]
  if (options.processMetrics ?? true) collectDefaultMetrics({ register: registry })

  // Counted by our own histogram, read by this registry (request-durations.ts: why).
  const durations = new RequestDurations({
    name: 'http_server_request_duration_seconds',
    help: 'Duration of HTTP server requests, from the request to the last byte of the response.',
    buckets: REQUEST_BUCKETS,
    registry,
  })
  const created = new Counter({
    name: 'petstore_pets_created_total',
    help: 'Pets created and durably committed.',
    registers,
  })
  const commitDuration = new Histogram({
    name: 'petstore_store_commit_duration_seconds',
    help: 'Duration of the transactions that create pets (SQLite: one group commit).',
    buckets: COMMIT_BUCKETS,
    registers,
  })
  const commitBatch = new Histogram({
    name: 'petstore_store_commit_batch_size',
    help: 'Pets created per transaction (SQLite group commit; 1 on PostgreSQL).',
    buckets: BATCH_BUCKETS,
    registers,
  })
  const replays = new Counter({
    name: 'petstore_idempotent_replays_total',
    help: 'Creates answered from the record of their Idempotency-Key, making no new pet (D14).',
    registers,
  })
  const rateLimited = new Counter({
    name: 'petstore_rate_limited_total',
    help: 'Requests refused 429 because their API key used its budget.',
    registers,
  })
  const failOpen = new Gauge({
    name: 'petstore_rate_limit_fail_open',
    help: '1 while the rate limit counter (Redis) fails and requests go through unlimited.',
    // Across cluster workers: 1 if any worker fails open.
    aggregator: 'max',
    registers,
  })
  const addressesRefused = new Counter({
    name: 'petstore_auth_failure_limited_total',
    help: 'Requests refused 429 because their client address reached its limit of failed authentications.',
    registers,
  })
  const failureCounterFailOpen = new Gauge({
    name: 'petstore_auth_failure_counter_fail_open',
    help: '1 while the failed-authentication counter (Redis) fails and failures go uncounted.',
    aggregator: 'max',
    registers,
  })
  const keyLookups = new Counter({
    name: 'petstore_api_key_lookups_total',
    help: 'API keys looked up in the store by hash (those memory could not answer), by whether one was active.',
    labelNames: ['result'],
    registers,
  })
  const activeLookups = keyLookups.labels('active')
  const unknownLookups = keyLookups.labels('unknown')
  const stagingAnswers = new Counter({
    name: 'petstore_rehearsed_answers_total',
    help: 'Staging only (D29): answers rehearsed with Prefer, or given by a random fault (PETSTORE_STAGING_FAULTS), by kind and by status or delay.',
    labelNames: ['kind', 'answer'],
    registers,
  })
  let shedCount = () => 0
  const unavailable = new Gauge({
    name: 'petstore_store_unavailable',
    help: '1 while the database fails (unreachable, locked past its wait, full, read-only, I/O errors) and requests that need it are answered 503; 0 once it works again.',
    aggregator: 'max',
    registers,
  })
  memoryLimits(registers)
  new Counter({
    name: 'petstore_load_shed_total',
    help: 'Requests answered 503 because the event loop was behind (load shedding).',
    registers,
    collect() {
      this.reset()
      this.inc(shedCount())
    },
  })

  return {
    registry,
    store: {
      unavailable: (failing) => unavailable.set(failing ? 1 : 0),
      committed(batchSize, seconds) {
        created.inc(batchSize)
        commitDuration.observe(seconds)
        commitBatch.observe(batchSize)
      },
      pool(stats: () => PoolStats) {
        const gauge = (name: string, help: string, read: (s: PoolStats) => number) =>
          new Gauge({
            name,
            help,
            registers,
            collect() {
              this.set(read(stats()))
            },
          })
        gauge(
          'petstore_db_pool_connections_in_use',
          'Pooled connections running a query.',
          (s) => s.inUse,
        )
        gauge(
          'petstore_db_pool_connections_idle',
          'Pooled connections open and idle.',
          (s) => s.idle,
        )
        gauge(
          'petstore_db_pool_requests_waiting',
          'Queries waiting for a pooled connection.',
          (s) => s.waiting,
        )
      },
    },
    rateLimit: {
      limited: () => rateLimited.inc(),
      failingOpen: (failing) => failOpen.set(failing ? 1 : 0),
    },
    authFailures: {
      refused: () => addressesRefused.inc(),
      failingOpen: (failing) => failureCounterFailOpen.set(failing ? 1 : 0),
    },
    keyLookups: {
      lookedUp: (active) => (active ? activeLookups : unknownLookups).inc(),
    },
    request(method, route, status, seconds) {
      durations.observe(method, route, status, seconds)
    },
    replayed: () => replays.inc(),
    staging: {
      answered: (kind, answer) => stagingAnswers.labels(kind, answer).inc(),
    },
    loadShedFrom(count) {
      shedCount = count
    },
    readinessFrom(ready) {
      // Registered last, after the store's pool gauges: a scrape reads the pool before this
      // check's ping takes a connection from it (or waits for one to open).
      new Gauge({
        name: 'petstore_ready',
        help: '1 when the process would answer /readyz 200 (the database answers, it is not draining), 0 when 503; checked at each scrape.',
        // Across cluster workers: 0 if any worker is not ready.
        aggregator: 'min',
        registers,
        async collect() {
          this.set((await ready()) ? 1 : 0)
        },
      })
    },
  }
}

/**
 * Above this, process.constrainedMemory() means "no limit": Node.js gives the cgroup's `max` as
 * the largest unsigned 64-bit number.
 */
const NO_LIMIT = 2 ** 62

/**
 * The limits memory is measured against (the alert on memory near its limit): the container's,
 * which the kernel enforces by ending the process, and V8's heap limit, past which the process
 * ends with a fatal error. Neither is among prom-client's process metrics.
 */
function memoryLimits(registers: Registry[]): void {
  new Gauge({
    name: 'petstore_memory_limit_bytes',
    help: "The memory limit the process runs under (its cgroup's, a container's), in bytes; 0 when there is none.",
    // Across cluster workers: one container's limit, against their summed resident memory.
    aggregator: 'max',
    registers,
    collect() {
      const limit = process.constrainedMemory()
      this.set(limit > 0 && limit < NO_LIMIT ? limit : 0)
    },
  })
  new Gauge({
    name: 'petstore_heap_size_limit_bytes',
    help: "V8's heap size limit (--max-old-space-size and the young generation), in bytes.",
    // Summed across workers, as their heaps are (nodejs_heap_size_used_bytes).
    aggregator: 'sum',
    registers,
    collect() {
      this.set(getHeapStatistics().heap_size_limit)
    },
  })
}

/**
 * In a cluster worker: the primary's AggregatorRegistry asks each worker for this registry over
 * the cluster IPC channel (prom-client's cluster module); constructing one installs the
 * worker's answering listener.
 */
export function answerClusterScrapes(registry: Registry): void {
  AggregatorRegistry.setRegistries([registry])
  new AggregatorRegistry()
}

/** In the cluster primary: every worker's figures, summed (gauges per their aggregator). */
export function clusterScrape(): Scrape {
  const aggregator = new AggregatorRegistry()
  return { contentType: aggregator.contentType, body: () => aggregator.clusterMetrics() }
}
