// Which test files run where (test/run.ts): on which engines, and which need a process of
// their own.

/** Test files that exist only for PostgreSQL; the SQLite run leaves them out. */
export const POSTGRES_ONLY = [
  'test/store/postgres.test.ts',
  'test/store/pgbouncer.test.ts',
  'test/store/postgres-disk-full.test.ts',
  'test/store/postgres-grants.test.ts',
  'test/scale/*.test.ts',
]
/**
 * The HTTP tests whose outcome depends on the engine: what is stored and read back, readiness,
 * a failing database, the pool's metrics. The others (auth, errors, headers, validation, logs,
 * load shedding, rate limits) never reach past the store interface; they run once, on SQLite.
 */
export const ENGINE_HTTP = [
  'create-pet',
  'create-pet-bytes',
  'get-pet',
  'health',
  'idempotency',
  'list-pets',
  'metrics',
  'unavailable',
].map((name) => `test/http/${name}.test.ts`)
/**
 * Files that start child processes (the CLI, services, npm), a browser, a PgBouncer or a proxy
 * in front of a database, or fill a disk: most of their time is spent waiting on those, so each
 * runs in a process of its own beside the rest. The others share one process per run: each file
 * in a process of its own would start Node.js, load and compile the app and its schemas again
 * (measured, test/http/*.test.ts: 38 s of CPU in 16 processes, 14 s in one).
 * test/architecture.test.ts checks that a file starting processes is listed here.
 */
export const ISOLATED = [
  // Longest first (wall time, measured alone), so that no long file starts last and runs alone.
  'test/cli.test.ts',
  // About 35 s, nearly all of it waiting on Prometheus' windows (9 s of CPU).
  'test/monitoring-prometheus.test.ts',
  'test/scale/pgbouncer-outage.test.ts',
  'test/scale/outage.test.ts',
  'test/scale/fleet.test.ts',
  'test/cluster.test.ts',
  'test/tracing.test.ts',
  'test/hostile-connections.test.ts',
  'test/signals.test.ts',
  'test/docs-page.test.ts',
  'test/durability.test.ts',
  'test/client/pack.test.ts',
  'test/client/browser.test.ts',
  'test/probe-flood.test.ts',
  'test/service.test.ts',
  'test/scale/instances.test.ts',
  'test/probe-listener.test.ts',
  'test/tracing-redaction.test.ts',
  'test/scale/fleet-trace.test.ts',
  'test/scale/auth-fleet.test.ts',
  'test/scale/idempotency.test.ts',
  'test/scale/connection-loss.test.ts',
  'test/store/sqlite-lock.test.ts',
  'test/cli-pets.test.ts',
  'test/upgrades.test.ts',
  'test/staging.test.ts',
  'test/store/pgbouncer.test.ts',
  'test/contract/generated-types.test.ts',
  'test/store/sqlite-disk-full.test.ts',
  'test/rate-limit/fail-open.test.ts',
  'test/readme-engines.test.ts',
  'test/store/postgres-disk-full.test.ts',
  'test/store/postgres-grants.test.ts',
  'test/client/response.test.ts',
  'test/monitoring.test.ts',
]
export const POSTGRES_RUN = [...ENGINE_HTTP, ...POSTGRES_ONLY]
/**
 * The fleet behind HAProxy, and the other tests of several instances on one database, run where
 * operators run several instances, behind PgBouncer (D19, D20): in the PgBouncer run only, when
 * there is one (else in the direct run). Twice, they were the longest files of `npm test` and a
 * sixth of its CPU, for what the pooler does not change; the store contract runs on both.
 */
export const FLEET_BEHIND_PGBOUNCER = [
  'test/scale/fleet.test.ts',
  'test/scale/fleet-trace.test.ts',
  'test/scale/instances.test.ts',
  'test/scale/auth-fleet.test.ts',
]
/**
 * The fleet runs behind PgBouncer too, as operators run one. In the PgBouncer run,
 * connection-loss.test.ts puts a private PgBouncer of its own in front, one
 * it can kill; in the PostgreSQL run it goes straight to PostgreSQL.
 */
export const PGBOUNCER_RUN = [
  ...ENGINE_HTTP,
  'test/scale/instances.test.ts',
  'test/scale/fleet.test.ts',
  'test/scale/fleet-trace.test.ts',
  'test/scale/auth-fleet.test.ts',
  'test/scale/connection-loss.test.ts',
]
