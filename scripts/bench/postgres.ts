// The PostgreSQL run of `npm run bench`: the same service on one seeded PostgreSQL database,
// straight to the server and through PgBouncer in transaction mode, side by side in alternating
// rounds, so the ratio is what the pooler's hop costs; and each beside the same bytes on
// PostgreSQL (same-bytes-postgres.ts: raw node:http, the service's statements through a pool of
// the same size, the service's headers), on the same path. More pairs say what the service
// cannot change: the same bytes through PgBouncer beside the same bytes direct (the pooler's hop
// with no service in it), and for the keyed create, the same bytes running the service's keyed
// statement (BENCH_KEYED=statement) beside the service and beside the same bytes' plain create
// (what the statement itself costs); and the drivers: postgres.js and pg's pipeline mode beside
// pg's pool. Writes its own section of docs/benchmarks.md (bench-postgres) and its JSON.
//
// PostgreSQL is the test server (PETSTORE_TEST_POSTGRES_URL or 127.0.0.1:5432, trust auth) and
// PgBouncer a private instance (test/helpers/pgbouncer.ts). Where either is absent the run is
// one plain line, unless PETSTORE_REQUIRE_POSTGRES=1 / PETSTORE_REQUIRE_PGBOUNCER=1 (CI).
import { randomBytes } from 'node:crypto'
import { openPostgresStore } from '../../src/store/postgres/store.ts'
import {
  absentLine,
  PGBOUNCER_REQUIRED,
  type PgBouncer,
  pgbouncerBinary,
  startPgBouncer,
} from '../../test/helpers/pgbouncer.ts'
import * as testServer from '../../test/helpers/postgres.ts'
import * as harness from './harness.ts'

/** DATABASE_POOL_SIZE of each service, and PgBouncer's default_pool_size: the same ten server
 * connections either way, so the ratio is the pooler's hop and nothing else. */
export const POOL_SIZE = 10

/** The operations of the PostgreSQL run. */
const MEASURED = ['list20', 'get', 'create', 'createKeyed']

/** seed.ts's pets, written by the server itself in one statement. */
async function seed(url: string, count: number): Promise<void> {
  const store = openPostgresStore({ url, poolSize: 1 })
  await store.migrate()
  await store.close()
  await testServer.onDatabase(url, async (client) => {
    await client.query(
      `INSERT INTO pets (name, category_id, status)
       SELECT (ARRAY['Rex','Bella','Milo','Luna','Oscar','Coco','Simba','Nala','Bruno','Kiwi'])[i % 10 + 1]
           || ' the ' || CASE WHEN i % 7 = 0 THEN 'Brave' ELSE 'Second' END || ' #' || i,
         (i * 7919) % 100 + 1,
         (ARRAY['available','pending','sold',NULL])[i % 4 + 1]
       FROM generate_series(1, $1::bigint) AS i`,
      [count],
    )
    await client.query('VACUUM ANALYZE pets')
  })
}

/** A new database on the test server named `<prefix>_<random>`, seeded, dropped after `work`. */
export async function withSeededDatabase<T>(
  prefix: string,
  pets: number,
  work: (url: string) => Promise<T>,
): Promise<T> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`
  await testServer.onDatabase(testServer.ADMIN_URL, (client) =>
    client.query(`CREATE DATABASE ${name}`),
  )
  const url = new URL(testServer.ADMIN_URL)
  url.pathname = `/${name}`
  try {
    harness.log(`PostgreSQL: seeding ${pets.toLocaleString('en')} pets into ${name}…`)
    await seed(url.toString(), pets)
    return await work(url.toString())
  } finally {
    await testServer.onDatabase(testServer.ADMIN_URL, (c) =>
      c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
    )
  }
}

/** Whether this run can happen; prints the one line why not, or throws where CI requires it. */
async function available(): Promise<boolean> {
  const [missing, required, variable] = !(await testServer.postgresReachable())
    ? [testServer.unreachableLine(), testServer.POSTGRES_REQUIRED, 'PETSTORE_REQUIRE_POSTGRES']
    : pgbouncerBinary() === undefined
      ? [absentLine(), PGBOUNCER_REQUIRED, 'PETSTORE_REQUIRE_PGBOUNCER']
      : []
  if (missing === undefined) return true
  if (required) throw new Error(`${missing}, but ${variable}=1`)
  harness.log(`${missing}: no PostgreSQL run`)
  return false
}

const keyedOnly = (operations: harness.Operation[]) =>
  operations.filter((o) => o.request.idempotencyKey)

type Path = 'direct' | 'pgbouncer'
type ByPath = Record<Path, harness.PairResult[]>

/** The servers on one path: the service and the same bytes in each of their variants. */
interface OnPath {
  service: harness.ServerProcess
  /** On pg's pool, as the service. */
  same: harness.ServerProcess
  postgresJs: harness.ServerProcess
  pipelined: harness.ServerProcess
  /** Running the service's keyed statement (only when the keyed create is measured). */
  keyed: harness.ServerProcess | undefined
}

/** The pairs measured on each path, by their names in the report, in the order measured. */
const PAIRS_BY_PATH: [string, string, (on: OnPath) => (harness.ServerProcess | undefined)[]][] = [
  ['sameBytes', 'the service vs same bytes', (s) => [s.service, s.same]],
  ['drivers', 'same bytes on postgres.js vs on pg', (s) => [s.postgresJs, s.same]],
  ['pipeline', "same bytes on pg's pipeline mode vs its pool", (s) => [s.pipelined, s.same]],
  ['keyedService', 'the service vs same bytes, keyed statement', (s) => [s.service, s.keyed]],
  ['keyedStatement', 'same bytes, keyed statement vs plain create', (s) => [s.keyed, s.same]],
]

interface PostgresReport {
  date: string
  durationSeconds: number
  versions: { postgres: string; pgbouncer: string }
  settings: Pick<
    harness.RunSettings,
    'pets' | 'rounds' | 'seconds' | 'warmupSeconds' | 'connections'
  > & {
    quick: boolean
    poolSize: number
  }
  /** Through PgBouncer ÷ direct. */
  pairs: harness.PairResult[]
  /** The service ÷ same bytes, direct and through PgBouncer. */
  sameBytes: ByPath
  /** Same bytes with postgres.js ÷ with pg (the service's driver), direct and through PgBouncer. */
  drivers: ByPath
  /** Same bytes with pg's pipeline mode ÷ with its pool, direct and through PgBouncer. */
  pipeline: ByPath
  /** Same bytes through PgBouncer ÷ same bytes direct: the pooler's hop without the service. */
  poolerReference: harness.PairResult[]
  /** The keyed create only: the service ÷ the same bytes running its keyed statement, and that
   * ÷ the same bytes' plain create, direct and through PgBouncer. */
  keyed: { service: ByPath; statement: ByPath }
}

/** The service and its same bytes on one path (`url`, direct or pooled), each checked. */
async function startPath(
  path: Path,
  url: string,
  settings: harness.RunSettings,
  operations: harness.Operation[],
  keep: ReturnType<typeof harness.keeper>,
): Promise<OnPath> {
  const pooler = path === 'direct' ? 'none' : 'transaction'
  // D16's load shedding off: PostgreSQL shares the two cores, and on a busy machine one shed 503
  // voids a whole round. D19: behind a transaction-mode pooler as an operator runs it there.
  const settled = { PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '0', DATABASE_POOLER: pooler }
  const env = harness.serviceEnv(settings.key, { url, poolSize: POOL_SIZE }, settled)
  const service = await keep(harness.startService(path, env))
  const same = (name: string, driver: string, keyed = false) => {
    const checked = keyed ? keyedOnly(operations) : operations
    return keep(
      harness.startReference(
        `same bytes ${name}${path}`,
        'same-bytes-postgres.ts',
        url,
        { key: settings.key, service, checked },
        {
          ...{ DATABASE_POOL_SIZE: String(POOL_SIZE), DATABASE_POOLER: pooler },
          ...{ BENCH_DRIVER: driver, BENCH_KEYED: keyed ? 'statement' : 'ignored' },
        },
      ),
    )
  }
  return {
    service,
    same: await same('', 'pg'),
    postgresJs: await same('on postgres.js ', 'postgres'),
    pipelined: await same('pipelined ', 'pg-pipeline'),
    keyed: keyedOnly(operations).length > 0 ? await same('keyed ', 'pg', true) : undefined,
  }
}

/** Every pair of the run: PgBouncer against direct, then each of PAIRS_BY_PATH on both paths. */
async function measurePairs(
  settings: harness.RunSettings,
  operations: harness.Operation[],
  on: Record<Path, OnPath>,
): Promise<Omit<PostgresReport, 'date' | 'durationSeconds' | 'versions' | 'settings'>> {
  const measure = async (
    title: string,
    servers: (harness.ServerProcess | undefined)[],
    ops = operations,
  ) => {
    const results: harness.PairResult[] = []
    const [service, baseline] = servers
    if (service === undefined || baseline === undefined) return results
    for (const operation of ops) {
      harness.log(`PostgreSQL, ${title}: ${operation.label}`)
      for (const connections of settings.connections) {
        results.push(await harness.pair(settings, operation, connections, service, baseline))
      }
    }
    return results
  }
  const { direct, pgbouncer } = on
  const pairs = await measure('through PgBouncer vs direct', [pgbouncer.service, direct.service])
  const byPath: Record<string, ByPath> = {}
  for (const [name, title, pick] of PAIRS_BY_PATH) {
    // The keyed create is measured beside the same bytes running its keyed statement.
    const ops = name.startsWith('keyed')
      ? keyedOnly(operations)
      : operations.filter((o) => name !== 'sameBytes' || !o.request.idempotencyKey)
    byPath[name] = {
      direct: await measure(`direct, ${title}`, pick(direct), ops),
      pgbouncer: await measure(`through PgBouncer, ${title}`, pick(pgbouncer), ops),
    }
  }
  const poolerReference = await measure('same bytes through PgBouncer vs direct', [
    pgbouncer.same,
    direct.same,
  ])
  const of = (name: string) => byPath[name] as ByPath
  return {
    ...{ pairs, sameBytes: of('sameBytes'), drivers: of('drivers'), pipeline: of('pipeline') },
    ...{ poolerReference, keyed: { service: of('keyedService'), statement: of('keyedStatement') } },
  }
}

async function versions(bouncer: PgBouncer): Promise<PostgresReport['versions']> {
  const first = async (url: string, sql: string) =>
    testServer.onDatabase(url, async (c) =>
      String(Object.values((await c.query(sql)).rows[0] ?? {})[0]),
    )
  return {
    postgres: await first(testServer.ADMIN_URL, 'SHOW server_version'),
    pgbouncer: await first(bouncer.urlFor('pgbouncer'), 'SHOW VERSION'),
  }
}

export async function benchPostgres(settings: harness.RunSettings): Promise<void> {
  const operations = harness
    .selectOperations(settings.pets, settings.only)
    .filter((o) => MEASURED.includes(o.id))
  if (operations.length === 0 || !(await available())) return
  const startedAt = new Date()
  await withSeededDatabase('petstore_bench', settings.pets, async (url) => {
    const running: harness.ServerProcess[] = []
    const keep = harness.keeper(running)
    const bouncer = await startPgBouncer({ poolSize: POOL_SIZE })
    try {
      const on = {
        direct: await startPath('direct', url, settings, operations, keep),
        pgbouncer: await startPath('pgbouncer', bouncer.through(url), settings, operations, keep),
      }
      const measured = await measurePairs(settings, operations, on)
      const { pets, rounds, seconds, warmupSeconds, connections } = settings
      const report: PostgresReport = {
        date: startedAt.toISOString(),
        durationSeconds: Math.round((Date.now() - startedAt.getTime()) / 1000),
        versions: await versions(bouncer),
        settings: {
          ...{ quick: settings.mode === 'quick', pets, rounds, seconds, warmupSeconds },
          ...{ connections, poolSize: POOL_SIZE },
        },
        ...measured,
      }
      harness.writeReport(settings.outBase, 'bench-postgres', report, renderPostgres(report))
    } finally {
      await harness.stopAll(running)
      await bouncer.stop()
    }
  })
}

function renderPostgres(report: PostgresReport): string {
  const { settings, versions } = report
  const lines = [
    `Run of ${report.date.slice(0, 16).replace('T', ' ')} UTC (${settings.quick ? 'quick' : 'full'}, ${report.durationSeconds} s): PostgreSQL ${versions.postgres.split(' ')[0]} and ${versions.pgbouncer}.`,
    '',
    `${harness.int(settings.pets)} pets in one PostgreSQL database; two instances of the service (\`DATABASE_POOL_SIZE=${settings.poolSize}\`) on it, one straight to PostgreSQL, one through PgBouncer in transaction mode (\`default_pool_size = ${settings.poolSize}\`); ${settings.rounds} alternating rounds of ${settings.seconds} s per figure after ${settings.warmupSeconds} s of warm-up on each side. The ratio is the median of the per-round ratios through PgBouncer ÷ direct. PostgreSQL and PgBouncer are not pinned: they share both cores with the service and the load generator; load shedding is off in both services, so that a busy machine cannot void a round.`,
    '',
    '| Operation | Conn. | req/s direct | req/s PgBouncer | **ratio** | p50 ms direct (PgBouncer) | p99 ms direct (PgBouncer) | CPU µs/req service direct (PgBouncer) | **same bytes: PgBouncer ÷ direct** |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|',
  ]
  for (const p of report.pairs) {
    const reference = report.poolerReference.find(
      (r) => r.scenario === p.scenario && r.connections === p.connections,
    )
    lines.push(
      `| ${p.label} | ${p.connections} | ${harness.int(p.baseline.rps)} | ${harness.int(p.service.rps)} | **${p.ratio.rps.toFixed(2)}×** | ${harness.ms(p.baseline.p50)} (${harness.ms(p.service.p50)}) | ${harness.ms(p.baseline.p99)} (${harness.ms(p.service.p99)}) | ${p.baseline.cpuUsPerRequest.toFixed(1)} (${p.service.cpuUsPerRequest.toFixed(1)}) | ${reference === undefined ? '–' : `**${reference.ratio.rps.toFixed(2)}×**`} |`,
    )
  }
  lines.push(
    '',
    "The last column is the pooler's hop without the service: the same bytes on PostgreSQL (below) through the same PgBouncer beside the same bytes direct, in alternating rounds of their own.",
    '',
    "The service beside the same bytes on PostgreSQL (`scripts/bench/same-bytes-postgres.ts`: raw `node:http`, the service's statements through a pg pool of the same size, its bodies and response headers; its createPet the plain durable INSERT; the keyed create is beside the same bytes running its keyed statement, below), each pair in alternating rounds, direct and through PgBouncer:",
    '',
    ...directAndPooled(report.sameBytes, 'service', 'same bytes'),
    '',
    "The driver: the same bytes on PostgreSQL run through postgres.js 3.4 (`BENCH_DRIVER=postgres`: the same statements, prepared on the same terms, the same pool size) beside the same through pg, the service's driver, each pair in alternating rounds. Higher req/s and lower CPU favour postgres.js:",
    '',
    ...directAndPooled(report.drivers, 'postgres.js', 'pg'),
    '',
    "pg's pipeline mode (pg 8.23, `pipeline: true`; `BENCH_DRIVER=pg-pipeline`): as many clients as the pool has connections, each sending every query given to it without waiting for the answers before, taken in turn, beside pg's pool, which lends each query a connection of its own; the same statements on the same terms. Higher req/s and lower CPU favour the pipeline:",
    '',
    ...directAndPooled(report.pipeline, 'pipelined', 'pooled'),
  )
  if (report.keyed.service.direct.length > 0) {
    lines.push(
      '',
      "The keyed create beside what its statement costs: the same bytes running the service's keyed statement (`BENCH_KEYED=statement`: D14's one statement, with the fingerprint, the answer around the new id and the dates the service binds), first beside the service's keyed create, then beside the same bytes' plain create (what the statement costs by the shortest path), each pair in alternating rounds:",
      '',
      ...directAndPooled(report.keyed.service, 'service', 'same bytes keyed'),
      '',
      ...directAndPooled(report.keyed.statement, 'same bytes keyed', 'same bytes plain'),
    )
  }
  lines.push(...harness.targetsTable('Targets (issue 54)', targets(report)))
  return lines.join('\n')
}

/** Each operation ≥ 0.90× its same bytes, direct and through the same PgBouncer. */
const SAME_BYTES_RATIO = 0.9

/**
 * Issue 54's targets on PostgreSQL, at every connection count measured: the service ÷ same bytes
 * direct and through PgBouncer (the keyed create beside the same bytes running its keyed
 * statement, keyed against keyed), p99 where the same bytes' own is under 8 ms, RSS.
 */
function targets(report: PostgresReport): harness.Target[] {
  const out: harness.Target[] = []
  const path = { direct: 'direct', pgbouncer: 'through PgBouncer' } as const
  for (const via of ['direct', 'pgbouncer'] as const) {
    const pairs = [...report.sameBytes[via], ...report.keyed.service[via]]
    for (const scenario of new Set(pairs.map((p) => p.scenario))) {
      const rows = pairs.filter((p) => p.scenario === scenario)
      const measured = rows.map((p) => `${harness.times(p.ratio.rps)} (${p.connections})`)
      const what = `${rows[0]?.label} ÷ same bytes, ${path[via]} (connections)`
      const met = rows.every((p) => p.ratio.rps >= SAME_BYTES_RATIO)
      out.push([what, `≥ ${SAME_BYTES_RATIO.toFixed(2)}×`, measured.join(', '), met])
    }
  }
  const all = [...Object.values(report.sameBytes), ...Object.values(report.keyed.service)].flat()
  const held = all.filter((p) => p.baseline.p99 < 8)
  const worst = [...held].sort((a, b) => b.service.p99 - a.service.p99)[0]
  if (worst !== undefined) {
    const what = `p99 latency, where the same bytes' own p99 < 8 ms (${held.length} of ${all.length} runs)`
    const where = `${worst.label}, ${worst.connections} connections`
    const p99 = worst.service.p99
    out.push([what, '≤ 10 ms', `worst ${harness.ms(p99)} ms (${where})`, p99 <= 10])
  }
  if (all.length > 0) {
    const rss = Math.max(...all.map((p) => p.service.rssMb))
    out.push(['server RSS under load', '≤ 150 MB', `peak ${rss.toFixed(0)} MB`, rss <= 150])
  }
  return out
}

/**
 * One row per operation and connection count: each pair's service `a` beside its baseline `b`,
 * direct and through PgBouncer.
 */
function directAndPooled(paired: ByPath, a: string, b: string): string[] {
  const rows = [
    `| Operation | Conn. | req/s ${a} direct | req/s ${b} direct | **${a} ÷ ${b}, direct** | req/s ${a} PgBouncer | req/s ${b} PgBouncer | **${a} ÷ ${b}, PgBouncer** | CPU µs/req direct: ${a} (${b}) | CPU µs/req PgBouncer: ${a} (${b}) | CPU ${a} ÷ ${b}, direct (PgBouncer) | p99 ms direct: ${a} (${b}) | RSS MB direct: ${a} (${b}) |`,
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  ]
  const cpu = (p: harness.PairResult) =>
    `${p.service.cpuUsPerRequest.toFixed(1)} (${p.baseline.cpuUsPerRequest.toFixed(1)})`
  const cpuRatio = (d: harness.PairResult, p: harness.PairResult) =>
    `${d.ratio.cpuUsPerRequest.toFixed(2)}× (${p.ratio.cpuUsPerRequest.toFixed(2)}×)`
  const rss = (p: harness.PairResult) =>
    `${p.service.rssMb.toFixed(0)} (${p.baseline.rssMb.toFixed(0)})`
  paired.direct.forEach((d, i) => {
    const p = paired.pgbouncer[i]
    if (p === undefined) return
    rows.push(
      `| ${d.label} | ${d.connections} | ${harness.int(d.service.rps)} | ${harness.int(d.baseline.rps)} | **${d.ratio.rps.toFixed(2)}×** | ${harness.int(p.service.rps)} | ${harness.int(p.baseline.rps)} | **${p.ratio.rps.toFixed(2)}×** | ${cpu(d)} | ${cpu(p)} | ${cpuRatio(d, p)} | ${harness.ms(d.service.p99)} (${harness.ms(d.baseline.p99)}) | ${rss(d)} |`,
    )
  })
  return rows
}
