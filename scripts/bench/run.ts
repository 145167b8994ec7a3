// npm run bench: our service against two references, side by side in one run.
//
// Starts the ceiling (scripts/bench/ceiling.ts: raw node:http, precomputed bodies identical in
// bytes to ours), the database limit (scripts/bench/db-limit.ts: raw node:http running our SQL
// on the same file for each read, bodies identical in bytes to ours) and the service as an
// operator runs it (bin/petstore.js serve) on a SQLite file seeded with 1,000,000 pets, then
// measures each operation at 10 and 50 keep-alive connections, alternating the references and
// the service round by round so that drift hits all of them. Servers run on one core, the load
// generator (this process) on the other. Figures are medians over the rounds; ratios are
// medians of the per-round ratios. Writes docs/benchmarks.md (the generated section)
// and docs/benchmarks.json.
//
//   npm run bench                      the full run (many minutes)
//   npm run bench -- --quick           a small table and short runs (< 1 min); for CI, asserts
//                                      nothing about speed, only that the harness works
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
import { generateApiKey } from '../../src/keys/api-key.ts'
import { encodeCursor } from '../../src/routes/cursor.ts'
import { sqliteMigrations } from '../../src/store/migrations/sqlite.ts'
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
import { type BenchReport, type PairResult, renderMarkdown } from './report.ts'
import { pair as pairRounds } from './rounds.ts'
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
  connections: [10, 50],
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

async function fetchAnswer(
  url: string,
  request: Request,
): Promise<{ status: number; body: string; link: string | null }> {
  const response = await fetch(url + request.path, {
    method: request.method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    ...(request.body === undefined ? {} : { body: request.body }),
  })
  return {
    status: response.status,
    body: await response.text(),
    link: response.headers.get('link'),
  }
}

/** Starts the ceiling with our service's own bodies, and checks that they are identical. */
async function startCeiling(service: ServerProcess): Promise<ServerProcess> {
  const get: Record<string, string> = {}
  let post = ''
  for (const { request } of scenarios) {
    const { status, body } = await fetchAnswer(service.url, request)
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
    const theirs = (await fetchAnswer(ceiling.url, request)).body
    if (theirs !== ours) throw new Error(`the ceiling's body for ${request.path} differs from ours`)
  }
  return ceiling
}

/** The reads, whose answers the database limit gives too (checked identical on every run). */
const DB_LIMIT_READS = ['list20', 'list100', 'status', 'deep', 'get']
/** Reads also measured against the database limit (fewer when quick: CI's run stays < 1 min). */
const DB_LIMIT_SCENARIOS = quick ? ['list20', 'get'] : DB_LIMIT_READS

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
    if (!DB_LIMIT_READS.includes(id)) continue
    const ours = await fetchAnswer(service.url, request)
    const theirs = await fetchAnswer(dbLimit.url, request)
    if (theirs.status !== 200 || theirs.body !== ours.body) {
      throw new Error(`the database limit's body for ${request.path} differs from ours`)
    }
    if (request.path.startsWith('/v1/pets?') && theirs.link !== ours.link) {
      throw new Error(`the database limit's Link for ${request.path} differs from ours`)
    }
  }
  return dbLimit
}

/** The service's app without its database (floor.ts), checked to answer as the service does. */
async function startFloor(service: ServerProcess): Promise<ServerProcess> {
  const floor = await startServer(
    'floor',
    [join(ROOT, 'scripts/bench/floor.ts'), String(settings.pets)],
    { PETSTORE_API_KEYS: key },
    '/healthz',
  )
  for (const { id, request } of scenarios) {
    if (!FLOOR_SCENARIOS.includes(id)) continue
    const ours = await fetchAnswer(service.url, request)
    const theirs = await fetchAnswer(floor.url, request)
    if (theirs.body !== ours.body) throw new Error(`the floor's body for ${request.path} differs`)
  }
  return floor
}

/** Read operations also measured on the floor, at 50 connections. */
const FLOOR_SCENARIOS = quick ? ['list20', 'get'] : ['list20', 'list100', 'status', 'get']

// --- measuring -------------------------------------------------------------------------------------

/** Rounds of service against a baseline, with this run's settings. */
function pair(
  label: string,
  request: Request,
  connections: number,
  service: ServerProcess,
  baseline: ServerProcess,
  dbLimit?: ServerProcess,
): Promise<Omit<PairResult, 'scenario' | 'label'>> {
  return pairRounds(
    { ...settings, key, log },
    label,
    request,
    connections,
    service,
    baseline,
    dbLimit,
  )
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
  const connections = 50
  const result = await pair('table-size', request, connections, service, small)
  return { scenario: 'table-size', label: 'listPets `limit=20`, big table vs 1k table', ...result }
}

/** The SQLite run: the service against the ceiling (and the floor, and table sizes). */
async function benchSqlite(): Promise<void> {
  const startedAt = new Date()
  const started = performance.now()
  const loadBefore = loadavg()
  const bigDb = await seededCopy(settings.pets)
  const smallDb = await seededCopy(settings.smallPets)
  pinSelf()

  const servers: ServerProcess[] = []
  const stopAll = () => Promise.all(servers.map((s) => s.stop()))
  process.on('SIGINT', () => {
    stopAll().then(() => process.exit(130))
  })

  let report: BenchReport
  try {
    const service = await startService('service', bigDb)
    servers.push(service)
    const ceiling = await startCeiling(service)
    servers.push(ceiling)
    const dbLimit = await startDbLimit(service, bigDb)
    servers.push(dbLimit)
    const small = await startService('service-1k', smallDb)
    servers.push(small)
    const floor = await startFloor(service)
    servers.push(floor)

    // What the rest of the machine did meanwhile (other people's tests share these cores).
    const ours = () =>
      servers.reduce((sum, s) => sum + cpuSeconds(s.pid), 0) +
      (process.cpuUsage().user + process.cpuUsage().system) / 1e6
    const machineBefore = machineCpuSeconds()
    const oursBefore = ours()
    const wallBefore = performance.now()

    const pairs: PairResult[] = []
    let tableSize: PairResult | undefined
    for (const scenario of selected) {
      // The table-size comparison goes before the creates, which grow the big table.
      if (scenario.id === 'create' && tableSize === undefined && only === undefined) {
        tableSize = await compareTableSizes(service, small)
      }
      log(`${scenario.label}`)
      for (const connections of settings.connections) {
        const reads = DB_LIMIT_SCENARIOS.includes(scenario.id) ? dbLimit : undefined
        const result = await pair(
          scenario.id,
          scenario.request,
          connections,
          service,
          ceiling,
          reads,
        )
        pairs.push({ scenario: scenario.id, label: scenario.label, ...result })
      }
    }
    if (tableSize === undefined && only === undefined)
      tableSize = await compareTableSizes(service, small)
    const floorPairs: PairResult[] = []
    for (const scenario of selected.filter((s) => FLOOR_SCENARIOS.includes(s.id))) {
      log(`floor (the app without its database): ${scenario.label}`)
      const result = await pair(scenario.id, scenario.request, 50, floor, ceiling)
      floorPairs.push({ scenario: scenario.id, label: scenario.label, ...result })
    }
    const machineAfter = machineCpuSeconds()
    const wallSeconds = (performance.now() - wallBefore) / 1000
    const othersCores =
      (machineAfter.busy - machineBefore.busy - (ours() - oursBefore)) / wallSeconds
    const stealCores = (machineAfter.steal - machineBefore.steal) / wallSeconds

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
        otherProcessesCores: Math.max(0, othersCores),
        stolenCores: stealCores,
      },
      pairs,
      tableSize: tableSize ?? null,
      floor: floorPairs,
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
