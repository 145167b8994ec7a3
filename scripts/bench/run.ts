// npm run bench: our service beside four references, side by side in one run.
//
// Starts the service as an operator runs it (bin/petstore.js serve) on a SQLite file seeded with
// 1,000,000 pets, and beside it, on the same file: the same bytes (scripts/bench/same-bytes.ts:
// raw node:http running our SQL and sending our bodies and response headers, createPet durable
// with a group commit, a keyed one with its Idempotency-Key's record in the same transaction),
// the framework floor (scripts/bench/fastify-floor.ts: bare Fastify doing the same), the
// database limit (scripts/bench/db-limit.ts: raw node:http, our SQL, minimal headers; reads
// only) and the ceiling (scripts/bench/ceiling.ts: raw node:http, precomputed bodies identical
// in bytes to ours). Each reference's answers are checked against the service's first. Then
// measures each operation at 10 and 50 keep-alive connections with wrk (load.ts), the service
// and every reference once per round, their order rotating from round to round so that drift
// hits all of them. Servers run on one core, wrk on the other. Figures are medians over the
// rounds; ratios are medians of the per-round ratios. Writes docs/benchmarks.md (the generated
// section) and docs/benchmarks.json.
//
//   npm run bench                      the full run (many minutes)
//   npm run bench -- --quick           a small table, 50 connections, short runs, fewer
//                                      references (< 1 min); for CI, asserts nothing about
//                                      speed, only that the harness works
//   LOG_LEVEL=info METRICS_PORT=off npm run bench -- --quick
//                                      the service with per-request log lines, without metrics
//   npm run bench -- --only get,create --rounds 3 --seconds 5 --profile
//                                      a subset; --profile writes the service's --cpu-prof
//                                      profile to .bench/profiles
//   npm run bench -- --engines postgres
//                                      only the PostgreSQL run (scripts/bench/postgres.ts:
//                                      direct and through PgBouncer); --engines sqlite only
//                                      the SQLite one. Each rewrites only its own section.
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, totalmem } from 'node:os'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { generateApiKey } from '../../src/contract/api-key.ts'
import { encodeCursor } from '../../src/http/routes/cursor.ts'
import { sqliteMigrations } from '../../src/store/sqlite/migrations.ts'
import { type Request, requireWrk, wrkVersion } from './load.ts'
import { benchPostgres } from './postgres.ts'
import {
  cpuSeconds,
  machineCpuSeconds,
  pinning,
  pinSelf,
  type ServerProcess,
  startServer,
} from './processes.ts'
import {
  type BenchReport,
  type Comparison,
  type PairResult,
  type Role,
  renderMarkdown,
} from './report.ts'
import { compare, pair } from './rounds.ts'
import { type Answer, checkSameAnswer, fetchAnswer } from './same-answer.ts'
import { writeSection } from './section.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const BENCH_DIR = join(ROOT, '.bench')

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    rounds: { type: 'string' },
    seconds: { type: 'string' },
    warmup: { type: 'string' },
    profile: { type: 'boolean', default: false },
    out: { type: 'string' },
    engines: { type: 'string' },
  },
})

const quick = args.quick
const settings = {
  mode: quick ? 'quick' : 'full',
  pets: quick ? 10_000 : 1_000_000,
  smallPets: 1_000,
  rounds: Number(args.rounds ?? (quick ? 1 : 5)),
  seconds: Number(args.seconds ?? (quick ? 1 : 5)),
  warmupSeconds: Number(args.warmup ?? (quick ? 0 : 2)),
  // Quick: 50 connections only, so that CI's run, with every reference, stays under a minute.
  connections: quick ? [50] : [10, 50],
}
const outBase =
  args.out ?? (quick ? join(BENCH_DIR, 'benchmarks-quick') : join(ROOT, 'docs/benchmarks'))

interface Scenario {
  id: string
  label: string
  request: Request
}

const deepAfter = settings.pets - settings.pets / 10
const scenarios: Scenario[] = [
  {
    id: 'list20',
    label: 'listPets `limit=20`',
    request: { method: 'GET', path: '/v1/pets?limit=20' },
  },
  {
    id: 'list100',
    label: 'listPets `limit=100`',
    request: { method: 'GET', path: '/v1/pets?limit=100' },
  },
  {
    id: 'status',
    label: 'listPets `limit=20&status=available`',
    request: { method: 'GET', path: '/v1/pets?limit=20&status=available' },
  },
  {
    id: 'deep',
    label: `listPets deep cursor page (after id ${deepAfter.toLocaleString('en')})`,
    request: { method: 'GET', path: `/v1/pets?limit=20&cursor=${encodeCursor(deepAfter)}` },
  },
  {
    id: 'get',
    label: 'getPet',
    request: { method: 'GET', path: `/v1/pets/${settings.pets / 2}` },
  },
  {
    id: 'create',
    label: 'createPet (durable)',
    request: {
      method: 'POST',
      path: '/v1/pets',
      body: JSON.stringify({ name: 'Benchmark Bella', categoryId: 42, status: 'available' }),
    },
  },
  {
    id: 'createKeyed',
    label: 'createPet (durable), a new `Idempotency-Key` each',
    request: {
      method: 'POST',
      path: '/v1/pets',
      body: JSON.stringify({ name: 'Benchmark Bella', categoryId: 42, status: 'available' }),
      idempotencyKey: true,
    },
  },
]
const only = args.only?.split(',')
const selected = scenarios.filter((s) => only === undefined || only.includes(s.id))
const log = (line: string) => process.stdout.write(`${line}\n`)

// --- seed: cached under .bench, keyed by the schema and the seeding code ---------------------

function seedFingerprint(): string {
  const seeder = readFileSync(join(ROOT, 'scripts/bench/seed.ts'), 'utf8')
  return createHash('sha256')
    .update(seeder)
    .update(JSON.stringify(sqliteMigrations))
    .digest('hex')
    .slice(0, 12)
}

function isCompleteSeed(path: string, count: number): boolean {
  try {
    const db = new DatabaseSync(path, { readOnly: true })
    try {
      const pets = db.prepare('SELECT count(*) AS n FROM pets').get()?.n
      const version = db.prepare('SELECT max(version) AS v FROM schema_migrations').get()?.v
      return pets === count && version === sqliteMigrations.at(-1)?.version
    } finally {
      db.close()
    }
  } catch {
    return false
  }
}

/** A private copy of a seeded file with `count` pets, seeding (in its own process) if needed. */
async function seededCopy(count: number): Promise<string> {
  mkdirSync(BENCH_DIR, { recursive: true })
  const name = `seed-${count}-${seedFingerprint()}.db`
  const seed = join(BENCH_DIR, name)
  if (!isCompleteSeed(seed, count)) {
    for (const stale of readdirSync(BENCH_DIR)) {
      if (stale.startsWith(`seed-${count}-`)) rmSync(join(BENCH_DIR, stale), { force: true })
    }
    log(`seeding ${count.toLocaleString('en')} pets (cached as .bench/${name})…`)
    const child = spawn(
      process.execPath,
      [join(ROOT, 'scripts/bench/seed.ts'), String(count), seed],
      {
        stdio: ['ignore', 'inherit', 'inherit'],
      },
    )
    const [code] = await once(child, 'exit')
    if (code !== 0 || !isCompleteSeed(seed, count)) throw new Error(`seeding ${count} pets failed`)
  }
  const copy = join(BENCH_DIR, `run-${count}.db`)
  for (const suffix of ['', '-wal', '-shm']) rmSync(copy + suffix, { force: true })
  copyFileSync(seed, copy)
  return copy
}

// --- servers -------------------------------------------------------------------------------------

const key = generateApiKey('production')

function startService(name: string, dbPath: string): Promise<ServerProcess> {
  const nodeArgs = args.profile
    ? [
        '--cpu-prof',
        `--cpu-prof-dir=${join(BENCH_DIR, 'profiles')}`,
        join(ROOT, 'bin/petstore.js'),
        'serve',
      ]
    : [join(ROOT, 'bin/petstore.js'), 'serve']
  return startServer(
    name,
    nodeArgs,
    {
      DATABASE_URL: `sqlite:${dbPath}`,
      // As operators run it: problems logged, metrics taken (on a free port). Either can be
      // set to measure its cost: LOG_LEVEL=info, METRICS_PORT=off.
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
      METRICS_PORT: process.env.METRICS_PORT ?? '0',
      PETSTORE_RATE_LIMIT: '0',
      PETSTORE_API_KEYS: key,
    },
    '/readyz',
  )
}

/** Starts the ceiling with our service's own bodies, and checks that they are identical. */
async function startCeiling(service: ServerProcess): Promise<ServerProcess> {
  const get: Record<string, string> = {}
  let post = ''
  for (const { request } of scenarios) {
    const { status, body } = await fetchAnswer(key, service.url, request)
    if (status >= 300) throw new Error(`${request.method} ${request.path}: ${status} ${body}`)
    if (request.method === 'GET') get[request.path] = body
    else post = body
  }
  const file = join(BENCH_DIR, 'ceiling-responses.json')
  writeFileSync(file, JSON.stringify({ authorization: `Bearer ${key}`, get, post }))
  const ceiling = await startServer(
    'ceiling',
    [join(ROOT, 'scripts/bench/ceiling.ts'), file],
    {},
    '/',
  )
  for (const { request } of scenarios) {
    const ours = request.method === 'GET' ? get[request.path] : post
    const theirs = (await fetchAnswer(key, ceiling.url, request)).body
    if (theirs !== ours) throw new Error(`the ceiling's body for ${request.path} differs from ours`)
  }
  return ceiling
}

const READS = ['list20', 'list100', 'status', 'deep', 'get']
const ALL = scenarios.map((s) => s.id)

/**
 * The scenarios on which each reference is measured beside the service and the ceiling; every
 * scenario a reference answers is still checked against the service on each run. Fewer when
 * quick, so that CI's run stays under a minute.
 */
const MEASURED: Record<'dbLimit' | 'sameBytes' | 'framework', string[]> = {
  dbLimit: quick ? ['list20', 'get'] : READS,
  sameBytes: quick ? ['list20', 'get', 'create', 'createKeyed'] : ALL,
  framework: quick ? ['list20', 'get', 'create'] : ALL,
}

/**
 * Starts the database limit on the service's own file, and checks that its bodies are the
 * service's and, on listPets, its Link header too (getPet's Link is the service's deprecation
 * notice, D7, which the limit does not send).
 */
async function startDbLimit(service: ServerProcess, dbPath: string): Promise<ServerProcess> {
  const dbLimit = await startServer(
    'db limit',
    [join(ROOT, 'scripts/bench/db-limit.ts'), dbPath],
    { BENCH_AUTHORIZATION: `Bearer ${key}` },
    '/',
  )
  for (const { id, request } of scenarios) {
    if (!READS.includes(id)) continue
    const ours = await fetchAnswer(key, service.url, request)
    const theirs = await fetchAnswer(key, dbLimit.url, request)
    if (theirs.status !== 200 || theirs.body !== ours.body) {
      throw new Error(`the database limit's body for ${request.path} differs from ours`)
    }
    const link = (answer: Answer) => answer.headers.get('link')
    if (request.path.startsWith('/v1/pets?') && link(theirs) !== link(ours)) {
      throw new Error(`the database limit's Link for ${request.path} differs from ours`)
    }
  }
  return dbLimit
}

/**
 * Starts a reference that answers every operation as the service does (same-bytes.ts,
 * fastify-floor.ts) on the service's own file, and checks its answer to every scenario.
 */
async function startSameAnswers(
  name: string,
  file: string,
  service: ServerProcess,
  dbPath: string,
): Promise<ServerProcess> {
  const server = await startServer(
    name,
    [join(ROOT, 'scripts/bench', file), dbPath],
    { BENCH_AUTHORIZATION: `Bearer ${key}` },
    '/',
  )
  for (const { request } of scenarios) {
    const ours = await fetchAnswer(key, service.url, request)
    checkSameAnswer(name, request, ours, await fetchAnswer(key, server.url, request))
  }
  return server
}

/** The service's app without its database (app-without-db.ts), checked to answer as it does. */
async function startAppWithoutDb(service: ServerProcess): Promise<ServerProcess> {
  const app = await startServer(
    'app without db',
    [join(ROOT, 'scripts/bench/app-without-db.ts'), String(settings.pets)],
    { PETSTORE_API_KEYS: key },
    '/healthz',
  )
  for (const { id, request } of scenarios) {
    if (!APP_WITHOUT_DB_SCENARIOS.includes(id)) continue
    const ours = await fetchAnswer(key, service.url, request)
    const theirs = await fetchAnswer(key, app.url, request)
    if (theirs.body !== ours.body) {
      throw new Error(`the app without database's body for ${request.path} differs`)
    }
  }
  return app
}

/** Read operations also measured on the app without its database, at 50 connections. */
const APP_WITHOUT_DB_SCENARIOS = quick ? ['get'] : ['list20', 'list100', 'status', 'get']

// --- measuring -------------------------------------------------------------------------------------

const roundSettings = { ...settings, key, log }

/** The references measured on one scenario beside the service. */
interface References {
  sameBytes: ServerProcess
  framework: ServerProcess
  dbLimit: ServerProcess
  ceiling: ServerProcess
}

function serversFor(
  id: string,
  service: ServerProcess,
  references: References,
): Partial<Record<Role, ServerProcess>> & { service: ServerProcess } {
  const servers: Partial<Record<Role, ServerProcess>> & { service: ServerProcess } = { service }
  for (const role of ['sameBytes', 'framework', 'dbLimit'] as const) {
    if (MEASURED[role].includes(id)) servers[role] = references[role]
  }
  servers.ceiling = references.ceiling
  return servers
}

// --- main ------------------------------------------------------------------------------------------

function packageVersion(name: string): string {
  return JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')).version
}

function cpuModel(): string {
  const model = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]
  return model ?? cpus()[0]?.model ?? 'unknown'
}

async function compareTableSizes(
  service: ServerProcess,
  small: ServerProcess,
): Promise<PairResult> {
  const request = scenarios[0]?.request as Request
  log(`table size: listPets limit=20 on ${settings.pets} vs ${settings.smallPets} pets`)
  const result = await pair(roundSettings, 'table-size', request, 50, service, small)
  return { scenario: 'table-size', label: 'listPets `limit=20`, big table vs 1k table', ...result }
}

/** Every server of the SQLite run, started and checked against the service. */
interface SqliteServers {
  service: ServerProcess
  references: References
  small: ServerProcess
  appWithoutDb: ServerProcess
}

/** Starts the servers one by one, each pushed to `started` at once so that all are stopped. */
async function startSqliteServers(
  bigDb: string,
  smallDb: string,
  started: ServerProcess[],
): Promise<SqliteServers> {
  const keep = <T extends ServerProcess>(server: T): T => {
    started.push(server)
    return server
  }
  const service = keep(await startService('service', bigDb))
  const references: References = {
    ceiling: keep(await startCeiling(service)),
    dbLimit: keep(await startDbLimit(service, bigDb)),
    sameBytes: keep(await startSameAnswers('same bytes', 'same-bytes.ts', service, bigDb)),
    framework: keep(await startSameAnswers('framework floor', 'fastify-floor.ts', service, bigDb)),
  }
  const small = keep(await startService('service-1k', smallDb))
  const appWithoutDb = keep(await startAppWithoutDb(service))
  return { service, references, small, appWithoutDb }
}

/** The measurements: every scenario and connection count, the table sizes, the app alone. */
async function measureSqlite(
  servers: SqliteServers,
): Promise<Pick<BenchReport, 'comparisons' | 'tableSize' | 'appWithoutDatabase'>> {
  const { service, references, small, appWithoutDb } = servers
  const comparisons: Comparison[] = []
  let tableSize: PairResult | undefined
  for (const scenario of selected) {
    // The table-size comparison goes before the creates, which grow the big table.
    if (scenario.id === 'create' && tableSize === undefined && only === undefined) {
      tableSize = await compareTableSizes(service, small)
    }
    log(`${scenario.label}`)
    for (const connections of settings.connections) {
      const result = await compare(
        roundSettings,
        scenario.id,
        scenario.request,
        connections,
        serversFor(scenario.id, service, references),
      )
      comparisons.push({ scenario: scenario.id, label: scenario.label, ...result })
    }
  }
  if (tableSize === undefined && only === undefined) {
    tableSize = await compareTableSizes(service, small)
  }
  const appWithoutDatabase: PairResult[] = []
  for (const scenario of selected.filter((s) => APP_WITHOUT_DB_SCENARIOS.includes(s.id))) {
    log(`the app without its database: ${scenario.label}`)
    const { request } = scenario
    const result = await pair(
      roundSettings,
      scenario.id,
      request,
      50,
      appWithoutDb,
      references.ceiling,
    )
    appWithoutDatabase.push({ scenario: scenario.id, label: scenario.label, ...result })
  }
  return { comparisons, tableSize: tableSize ?? null, appWithoutDatabase }
}

/**
 * What the rest of the machine did during `work` (other people's tests share these cores), in
 * cores on average: CPU time not used by `servers` or this process, and time stolen.
 */
async function othersDuring<T>(
  servers: ServerProcess[],
  work: () => Promise<T>,
): Promise<{ result: T; otherProcessesCores: number; stolenCores: number }> {
  const ours = () =>
    servers.reduce((sum, s) => sum + cpuSeconds(s.pid), 0) +
    (process.cpuUsage().user + process.cpuUsage().system) / 1e6
  const machineBefore = machineCpuSeconds()
  const oursBefore = ours()
  const wallBefore = performance.now()
  const result = await work()
  const machineAfter = machineCpuSeconds()
  const wallSeconds = (performance.now() - wallBefore) / 1000
  const others = (machineAfter.busy - machineBefore.busy - (ours() - oursBefore)) / wallSeconds
  return {
    result,
    otherProcessesCores: Math.max(0, others),
    stolenCores: (machineAfter.steal - machineBefore.steal) / wallSeconds,
  }
}

/** The SQLite run: the service beside its references (and the table sizes, the app alone). */
async function benchSqlite(): Promise<void> {
  const startedAt = new Date()
  const started = performance.now()
  const loadBefore = loadavg()
  const bigDb = await seededCopy(settings.pets)
  const smallDb = await seededCopy(settings.smallPets)
  pinSelf()

  const running: ServerProcess[] = []
  const stopAll = () => Promise.all(running.map((s) => s.stop()))
  process.on('SIGINT', () => {
    stopAll().then(() => process.exit(130))
  })

  let report: BenchReport
  try {
    const servers = await startSqliteServers(bigDb, smallDb, running)
    const { result, otherProcessesCores, stolenCores } = await othersDuring(running, () =>
      measureSqlite(servers),
    )
    report = {
      date: startedAt.toISOString(),
      durationSeconds: Math.round((performance.now() - started) / 1000),
      machine: {
        cpu: cpuModel(),
        cores: cpus().length,
        memoryGb: Math.round(totalmem() / 2 ** 30),
      },
      versions: {
        node: process.versions.node,
        fastify: packageVersion('fastify'),
        sqlite: process.versions.sqlite ?? 'unknown',
        wrk: wrkVersion(),
      },
      settings: { ...settings, pinning: pinning ?? null, scenarios: selected.map((s) => s.id) },
      conditions: {
        loadAverageBefore: loadBefore,
        loadAverageAfter: loadavg(),
        otherProcessesCores,
        stolenCores,
      },
      ...result,
    }
  } finally {
    await stopAll()
  }

  const markdown = renderMarkdown(report)
  writeFileSync(`${outBase}.json`, `${JSON.stringify(report, null, 2)}\n`)
  const mdPath = `${outBase}.md`
  writeSection(mdPath, 'bench', markdown)
  log(`\n${markdown}`)
  log(`wrote ${mdPath} and ${outBase}.json in ${report.durationSeconds} s`)
}

requireWrk()
const engines = (args.engines ?? 'sqlite,postgres').split(',')
if (engines.includes('sqlite')) await benchSqlite()
if (engines.includes('postgres')) {
  await benchPostgres({
    quick,
    pets: settings.pets,
    rounds: settings.rounds,
    seconds: settings.seconds,
    warmupSeconds: settings.warmupSeconds,
    connections: settings.connections,
    only,
    key,
    log,
    outBase,
  })
}
