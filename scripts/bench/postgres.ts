// The PostgreSQL run of `npm run bench`: the same service on one seeded PostgreSQL database,
// straight to the server and through PgBouncer in transaction mode, side by side in alternating
// rounds (scripts/bench/rounds.ts), so the ratio is what the pooler's hop costs; and each beside
// the same bytes on PostgreSQL (same-bytes-postgres.ts: raw node:http, the service's statements
// through a pool of the same size, the service's headers), on the same path. More pairs say
// what the service cannot change: the same bytes through PgBouncer beside the same bytes direct
// (the pooler's hop with no service in it), and for the keyed create, the same bytes running the
// service's keyed statement (BENCH_KEYED=statement) beside the service and beside the same bytes'
// plain create (what the statement itself costs); and the drivers: postgres.js and pg's pipeline
// mode beside pg's pool. Writes its own
// section of docs/benchmarks.md (markers bench-postgres:begin/end) and docs/benchmarks-postgres.json;
// the SQLite section is left as it is.
//
// PostgreSQL is the test server (PETSTORE_TEST_POSTGRES_URL or 127.0.0.1:5432, trust auth) and
// PgBouncer a private instance (test/helpers/pgbouncer.ts). Where either is absent the run is
// one plain line, unless PETSTORE_REQUIRE_POSTGRES=1 / PETSTORE_REQUIRE_PGBOUNCER=1 (CI).
import { randomBytes } from 'node:crypto'
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { openPostgresStore } from '../../src/store/postgres/store.ts'
import {
  absentLine,
  PGBOUNCER_REQUIRED,
  type PgBouncer,
  pgbouncerBinary,
  startPgBouncer,
} from '../../test/helpers/pgbouncer.ts'
import {
  ADMIN_URL,
  onDatabase,
  POSTGRES_REQUIRED,
  postgresReachable,
  unreachableLine,
} from '../../test/helpers/postgres.ts'
import type { Request } from './load.ts'
import { type ServerProcess, startServer } from './processes.ts'
import type { PairResult } from './report.ts'
import { pair } from './rounds.ts'
import { checkSameAnswer, fetchAnswer } from './same-answer.ts'
import { writeSection } from './section.ts'

export interface PostgresBenchOptions {
  quick: boolean
  pets: number
  rounds: number
  seconds: number
  warmupSeconds: number
  connections: number[]
  /** Scenario ids to run; all when undefined. */
  only: string[] | undefined
  key: string
  log: (line: string) => void
  /** `<outBase>.md` gets the section, `<outBase>-postgres.json` the figures. */
  outBase: string
}

/** DATABASE_POOL_SIZE of each service, and PgBouncer's default_pool_size: the same ten server
 * connections either way, so the ratio is the pooler's hop and nothing else. */
export const POOL_SIZE = 10

const CREATE_BODY = JSON.stringify({ name: 'Benchmark Bella', categoryId: 42, status: 'available' })

function scenarios(pets: number): { id: string; label: string; request: Request }[] {
  return [
    {
      id: 'list20',
      label: 'listPets `limit=20`',
      request: { method: 'GET', path: '/v1/pets?limit=20' },
    },
    { id: 'get', label: 'getPet', request: { method: 'GET', path: `/v1/pets/${pets / 2}` } },
    {
      id: 'create',
      label: 'createPet (durable)',
      request: { method: 'POST', path: '/v1/pets', body: CREATE_BODY },
    },
    {
      id: 'createKeyed',
      label: 'createPet (durable), a new `Idempotency-Key` each',
      request: { method: 'POST', path: '/v1/pets', body: CREATE_BODY, idempotencyKey: true },
    },
  ]
}

/** scripts/bench/seed.ts's pets (seededPet), written by the server itself in one statement. */
export async function seed(url: string, count: number): Promise<void> {
  const store = openPostgresStore({ url, poolSize: 1 })
  await store.migrate()
  await store.close()
  await onDatabase(url, async (client) => {
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

export function service(
  name: string,
  url: string,
  key: string,
  extra: Record<string, string> = {},
): Promise<ServerProcess> {
  return startServer(
    name,
    [fileURLToPath(new URL('../../bin/petstore.js', import.meta.url)), 'serve'],
    {
      DATABASE_URL: url,
      DATABASE_POOL_SIZE: String(POOL_SIZE),
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
      METRICS_PORT: process.env.METRICS_PORT ?? '0',
      PETSTORE_RATE_LIMIT: '0',
      // D16's load shedding off: PostgreSQL shares the two cores, and on a busy machine one
      // shed 503 voids a whole round.
      PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '0',
      PETSTORE_API_KEYS: key,
      ...extra,
    },
    '/readyz',
  )
}

/** same-bytes-postgres.ts's BENCH_DRIVER. */
type Driver = 'pg' | 'pg-pipeline' | 'postgres'

/**
 * The same bytes on PostgreSQL (same-bytes-postgres.ts) with the services' pool size, on the
 * path `service` takes (its DATABASE_URL and DATABASE_POOLER), checked to answer every selected
 * scenario as `service` does.
 */
async function sameBytes(
  name: string,
  service: { process: ServerProcess; url: string; pooler: 'none' | 'transaction' },
  driver: Driver,
  options: PostgresBenchOptions,
  selected: readonly { request: Request }[],
  keyed: 'statement' | 'ignored' = 'ignored',
): Promise<ServerProcess> {
  const server = await startServer(
    name,
    [fileURLToPath(new URL('./same-bytes-postgres.ts', import.meta.url)), service.url],
    {
      BENCH_AUTHORIZATION: `Bearer ${options.key}`,
      DATABASE_POOL_SIZE: String(POOL_SIZE),
      DATABASE_POOLER: service.pooler,
      BENCH_DRIVER: driver,
      BENCH_KEYED: keyed,
    },
    '/',
  )
  for (const { request } of selected) {
    const ours = await fetchAnswer(options.key, service.process.url, request)
    checkSameAnswer(name, request, ours, await fetchAnswer(options.key, server.url, request))
  }
  return server
}

/** Whether this run can happen; prints the one line, or throws where CI requires it. */
async function available(log: (line: string) => void): Promise<boolean> {
  if (!(await postgresReachable())) {
    if (POSTGRES_REQUIRED) throw new Error(`${unreachableLine()}, but PETSTORE_REQUIRE_POSTGRES=1`)
    log(`${unreachableLine()}: no PostgreSQL run`)
    return false
  }
  if (pgbouncerBinary() === undefined) {
    if (PGBOUNCER_REQUIRED) throw new Error(`${absentLine()}, but PETSTORE_REQUIRE_PGBOUNCER=1`)
    log(`${absentLine()}: no PostgreSQL run`)
    return false
  }
  return true
}

export interface PostgresReport {
  date: string
  durationSeconds: number
  versions: { postgres: string; pgbouncer: string }
  settings: Omit<PostgresBenchOptions, 'key' | 'log' | 'outBase' | 'only'> & { poolSize: number }
  /** Through PgBouncer ÷ direct. */
  pairs: PairResult[]
  /** The service ÷ same bytes, direct and through PgBouncer. */
  sameBytes: { direct: PairResult[]; pgbouncer: PairResult[] }
  /** Same bytes with postgres.js ÷ with pg (the service's driver), direct and through PgBouncer. */
  drivers: { direct: PairResult[]; pgbouncer: PairResult[] }
  /** Same bytes with pg's pipeline mode ÷ with its pool, direct and through PgBouncer. */
  pipeline: { direct: PairResult[]; pgbouncer: PairResult[] }
  /** Same bytes through PgBouncer ÷ same bytes direct: the pooler's hop without the service. */
  poolerReference: PairResult[]
  /** The keyed create only: the service ÷ the same bytes running its keyed statement, and that
   * ÷ the same bytes' plain create, direct and through PgBouncer. */
  keyed: {
    service: { direct: PairResult[]; pgbouncer: PairResult[] }
    statement: { direct: PairResult[]; pgbouncer: PairResult[] }
  }
}

export async function benchPostgres(options: PostgresBenchOptions): Promise<void> {
  const { log } = options
  const selected = scenarios(options.pets).filter(
    (s) => options.only === undefined || options.only.includes(s.id),
  )
  if (selected.length === 0) return
  if (!(await available(log))) return
  const startedAt = new Date()
  const started = performance.now()
  const name = `petstore_bench_${randomBytes(6).toString('hex')}`
  await onDatabase(ADMIN_URL, (client) => client.query(`CREATE DATABASE ${name}`))
  const directUrl = new URL(ADMIN_URL)
  directUrl.pathname = `/${name}`
  const servers: ServerProcess[] = []
  let bouncer: PgBouncer | undefined
  try {
    log(`PostgreSQL: seeding ${options.pets.toLocaleString('en')} pets into ${name}…`)
    await seed(directUrl.toString(), options.pets)
    bouncer = await startPgBouncer({ poolSize: POOL_SIZE })
    const direct = await service('direct', directUrl.toString(), options.key)
    servers.push(direct)
    // D19: as an operator runs it behind a transaction-mode pooler.
    const pooled = await service('pgbouncer', bouncer.through(directUrl.toString()), options.key, {
      DATABASE_POOLER: 'transaction',
    })
    servers.push(pooled)
    const url = directUrl.toString()
    const onDirect = { process: direct, url, pooler: 'none' } as const
    const onPooled = { process: pooled, url: bouncer.through(url), pooler: 'transaction' } as const
    const keyedScenarios = selected.filter((s) => s.id === 'createKeyed')
    const start = async (
      name: string,
      path: typeof onDirect | typeof onPooled,
      driver: Driver,
      keyed: 'statement' | 'ignored' = 'ignored',
    ) => {
      const checked = keyed === 'statement' ? keyedScenarios : selected
      const server = await sameBytes(name, path, driver, options, checked, keyed)
      servers.push(server)
      return server
    }
    const sameDirect = await start('same bytes direct', onDirect, 'pg')
    const samePooled = await start('same bytes pgbouncer', onPooled, 'pg')
    const jsDirect = await start('same bytes on postgres.js direct', onDirect, 'postgres')
    const jsPooled = await start('same bytes on postgres.js pgbouncer', onPooled, 'postgres')
    const pipelineDirect = await start('same bytes pipelined direct', onDirect, 'pg-pipeline')
    const pipelinePooled = await start('same bytes pipelined pgbouncer', onPooled, 'pg-pipeline')
    const keyedDirect =
      keyedScenarios.length > 0
        ? await start('same bytes keyed direct', onDirect, 'pg', 'statement')
        : undefined
    const keyedPooled =
      keyedScenarios.length > 0
        ? await start('same bytes keyed pgbouncer', onPooled, 'pg', 'statement')
        : undefined
    const pairs: PairResult[] = []
    const sameBytesPairs: PostgresReport['sameBytes'] = { direct: [], pgbouncer: [] }
    const driverPairs: PostgresReport['drivers'] = { direct: [], pgbouncer: [] }
    const pipelinePairs: PostgresReport['pipeline'] = { direct: [], pgbouncer: [] }
    const poolerReference: PairResult[] = []
    const keyedPairs: PostgresReport['keyed'] = {
      service: { direct: [], pgbouncer: [] },
      statement: { direct: [], pgbouncer: [] },
    }
    const measure = async (
      into: PairResult[],
      title: string,
      service: ServerProcess,
      baseline: ServerProcess,
      scenarios = selected,
    ) => {
      for (const scenario of scenarios) {
        log(`PostgreSQL, ${title}: ${scenario.label}`)
        for (const connections of options.connections) {
          const result = await pair(
            options,
            scenario.id,
            scenario.request,
            connections,
            service,
            baseline,
          )
          into.push({ scenario: scenario.id, label: scenario.label, ...result })
        }
      }
    }
    await measure(pairs, 'through PgBouncer vs direct', pooled, direct)
    // The keyed create is measured beside the same bytes running its keyed statement (below).
    const unkeyed = selected.filter((s) => s.id !== 'createKeyed')
    await measure(
      sameBytesPairs.direct,
      'direct, the service vs same bytes',
      direct,
      sameDirect,
      unkeyed,
    )
    await measure(
      sameBytesPairs.pgbouncer,
      'through PgBouncer, the service vs same bytes',
      pooled,
      samePooled,
      unkeyed,
    )
    await measure(
      driverPairs.direct,
      'direct, same bytes on postgres.js vs on pg',
      jsDirect,
      sameDirect,
    )
    await measure(
      driverPairs.pgbouncer,
      'through PgBouncer, same bytes on postgres.js vs on pg',
      jsPooled,
      samePooled,
    )
    await measure(
      pipelinePairs.direct,
      "direct, same bytes on pg's pipeline mode vs its pool",
      pipelineDirect,
      sameDirect,
    )
    await measure(
      pipelinePairs.pgbouncer,
      "through PgBouncer, same bytes on pg's pipeline mode vs its pool",
      pipelinePooled,
      samePooled,
    )
    await measure(poolerReference, 'same bytes through PgBouncer vs direct', samePooled, sameDirect)
    if (keyedDirect !== undefined && keyedPooled !== undefined) {
      const keyed = async (
        into: { direct: PairResult[]; pgbouncer: PairResult[] },
        title: string,
        direct: [ServerProcess, ServerProcess],
        pooled: [ServerProcess, ServerProcess],
      ) => {
        await measure(into.direct, `direct, ${title}`, ...direct, keyedScenarios)
        await measure(into.pgbouncer, `through PgBouncer, ${title}`, ...pooled, keyedScenarios)
      }
      await keyed(
        keyedPairs.service,
        'the service vs same bytes running the keyed statement',
        [direct, keyedDirect],
        [pooled, keyedPooled],
      )
      await keyed(
        keyedPairs.statement,
        "same bytes running the keyed statement vs same bytes' plain create",
        [keyedDirect, sameDirect],
        [keyedPooled, samePooled],
      )
    }
    const postgres = await onDatabase(
      ADMIN_URL,
      async (c) => (await c.query('SHOW server_version')).rows[0],
    )
    const report: PostgresReport = {
      date: startedAt.toISOString(),
      durationSeconds: Math.round((performance.now() - started) / 1000),
      versions: {
        postgres: String(postgres.server_version),
        pgbouncer: await pgbouncerVersion(bouncer),
      },
      settings: {
        quick: options.quick,
        pets: options.pets,
        rounds: options.rounds,
        seconds: options.seconds,
        warmupSeconds: options.warmupSeconds,
        connections: options.connections,
        poolSize: POOL_SIZE,
      },
      pairs,
      sameBytes: sameBytesPairs,
      drivers: driverPairs,
      pipeline: pipelinePairs,
      poolerReference,
      keyed: keyedPairs,
    }
    const markdown = renderPostgres(report)
    mkdirSync(dirname(options.outBase), { recursive: true })
    writeFileSync(`${options.outBase}-postgres.json`, `${JSON.stringify(report, null, 2)}\n`)
    writeSection(`${options.outBase}.md`, 'bench-postgres', markdown)
    log(`\n${markdown}`)
    log(`wrote the PostgreSQL section of ${options.outBase}.md in ${report.durationSeconds} s`)
  } finally {
    await Promise.all(servers.map((s) => s.stop()))
    await bouncer?.stop()
    await onDatabase(ADMIN_URL, (client) =>
      client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
    )
  }
}

async function pgbouncerVersion(bouncer: PgBouncer): Promise<string> {
  const row = await onDatabase(
    bouncer.urlFor('pgbouncer'),
    async (c) => (await c.query('SHOW VERSION')).rows[0],
  )
  return String(Object.values(row ?? {})[0] ?? 'unknown')
}

const int = (n: number) => Math.round(n).toLocaleString('en')
const ms = (n: number) => n.toFixed(2)

export function renderPostgres(report: PostgresReport): string {
  const { settings, versions } = report
  const lines = [
    `Run of ${report.date.slice(0, 16).replace('T', ' ')} UTC (${settings.quick ? 'quick' : 'full'}, ${report.durationSeconds} s): PostgreSQL ${versions.postgres.split(' ')[0]} and ${versions.pgbouncer}.`,
    '',
    `${int(settings.pets)} pets in one PostgreSQL database; two instances of the service (\`DATABASE_POOL_SIZE=${settings.poolSize}\`) on it, one straight to PostgreSQL, one through PgBouncer in transaction mode (\`default_pool_size = ${settings.poolSize}\`); ${settings.rounds} alternating rounds of ${settings.seconds} s per figure after ${settings.warmupSeconds} s of warm-up on each side. The ratio is the median of the per-round ratios through PgBouncer ÷ direct. PostgreSQL and PgBouncer are not pinned: they share both cores with the service and the load generator; load shedding is off in both services, so that a busy machine cannot void a round.`,
    '',
    '| Operation | Conn. | req/s direct | req/s PgBouncer | **ratio** | p50 ms direct (PgBouncer) | p99 ms direct (PgBouncer) | CPU µs/req service direct (PgBouncer) | **same bytes: PgBouncer ÷ direct** |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|',
  ]
  for (const p of report.pairs) {
    const reference = report.poolerReference.find(
      (r) => r.scenario === p.scenario && r.connections === p.connections,
    )
    lines.push(
      `| ${p.label} | ${p.connections} | ${int(p.baseline.rps)} | ${int(p.service.rps)} | **${p.ratio.rps.toFixed(2)}×** | ${ms(p.baseline.p50)} (${ms(p.service.p50)}) | ${ms(p.baseline.p99)} (${ms(p.service.p99)}) | ${p.baseline.cpuUsPerRequest.toFixed(1)} (${p.service.cpuUsPerRequest.toFixed(1)}) | ${reference === undefined ? '–' : `**${reference.ratio.rps.toFixed(2)}×**`} |`,
    )
  }
  lines.push(
    '',
    "The last column is the pooler's hop without the service: the same bytes on PostgreSQL (below) through the same PgBouncer beside the same bytes direct, in alternating rounds of their own.",
  )
  lines.push(
    '',
    "The service beside the same bytes on PostgreSQL (`scripts/bench/same-bytes-postgres.ts`: raw `node:http`, the service's statements through a pg pool of the same size, its bodies and response headers; its createPet the plain durable INSERT; the keyed create is beside the same bytes running its keyed statement, below), each pair in alternating rounds, direct and through PgBouncer:",
    '',
  )
  lines.push(...directAndPooled(report.sameBytes, 'service', 'same bytes'))
  lines.push(
    '',
    "The driver: the same bytes on PostgreSQL run through postgres.js 3.4 (`BENCH_DRIVER=postgres`: the same statements, prepared on the same terms, the same pool size) beside the same through pg, the service's driver, each pair in alternating rounds. Higher req/s and lower CPU favour postgres.js:",
    '',
  )
  lines.push(...directAndPooled(report.drivers, 'postgres.js', 'pg'))
  lines.push(
    '',
    "pg's pipeline mode (pg 8.23, `pipeline: true`; `BENCH_DRIVER=pg-pipeline`): as many clients as the pool has connections, each sending every query given to it without waiting for the answers before, taken in turn, beside pg's pool, which lends each query a connection of its own; the same statements on the same terms. Higher req/s and lower CPU favour the pipeline:",
    '',
  )
  lines.push(...directAndPooled(report.pipeline, 'pipelined', 'pooled'))
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
  return lines.join('\n')
}

/**
 * One row per scenario and connection count: each pair's service `a` beside its baseline `b`,
 * direct and through PgBouncer.
 */
function directAndPooled(
  paired: { direct: PairResult[]; pgbouncer: PairResult[] },
  a: string,
  b: string,
): string[] {
  const rows = [
    `| Operation | Conn. | req/s ${a} direct | req/s ${b} direct | **${a} ÷ ${b}, direct** | req/s ${a} PgBouncer | req/s ${b} PgBouncer | **${a} ÷ ${b}, PgBouncer** | CPU µs/req direct: ${a} (${b}) | CPU µs/req PgBouncer: ${a} (${b}) | CPU ${a} ÷ ${b}, direct (PgBouncer) | p99 ms direct: ${a} (${b}) | RSS MB direct: ${a} (${b}) |`,
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  ]
  const cpu = (p: PairResult) =>
    `${p.service.cpuUsPerRequest.toFixed(1)} (${p.baseline.cpuUsPerRequest.toFixed(1)})`
  const cpuRatio = (d: PairResult, p: PairResult) =>
    `${d.ratio.cpuUsPerRequest.toFixed(2)}× (${p.ratio.cpuUsPerRequest.toFixed(2)}×)`
  const rss = (p: PairResult) => `${p.service.rssMb.toFixed(0)} (${p.baseline.rssMb.toFixed(0)})`
  paired.direct.forEach((d, i) => {
    const p = paired.pgbouncer[i]
    if (p === undefined) return
    rows.push(
      `| ${d.label} | ${d.connections} | ${int(d.service.rps)} | ${int(d.baseline.rps)} | **${d.ratio.rps.toFixed(2)}×** | ${int(p.service.rps)} | ${int(p.baseline.rps)} | **${p.ratio.rps.toFixed(2)}×** | ${cpu(d)} | ${cpu(p)} | ${cpuRatio(d, p)} | ${ms(d.service.p99)} (${ms(d.baseline.p99)}) | ${rss(d)} |`,
    )
  })
  return rows
}
