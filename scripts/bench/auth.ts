// What API keys made by the CLI cost, and what a flood of refused tokens costs, before and after
// D3's key cache (PETSTORE_KEY_CACHE_MS) and limit on failed authentications
// (PETSTORE_AUTH_FAILURE_LIMIT): a checkout of the commit before (--base) beside this checkout
// with the defaults, side by side in alternating rounds (rounds.ts, the ab.ts way), on SQLite,
// on PostgreSQL direct, and on PostgreSQL through PgBouncer in transaction mode.
//
// 1. A key made by `petstore keys create`, stored as its SHA-256 (not PETSTORE_API_KEYS, which is
//    held in memory and costs no look-up either way): getPet and listPets `limit=20`, req/s,
//    CPU µs/req and p99 in rounds; then one more run of each service alone, counting what the
//    store was asked. On PostgreSQL that is read at the server, whatever the service says: the
//    database's transactions (pg_stat_database xact_commit + xact_rollback; each autocommit
//    statement is one, so one round trip) and the scans of api_keys (pg_stat_user_tables
//    seq_scan + idx_scan: key look-ups), each service on a database of its own (clones of one
//    seed). On SQLite, the after service's petstore_api_key_lookups_total; the base has no such
//    counter, and looks a stored key up on every request by construction.
// 2. Floods of refused tokens from one client address, each request a new token (wrk cycles
//    through a file of them, so that it stays cheap): well-formed keys (the live prefix and a
//    right checksum, so each one reached the store before), then opaque tokens (40 hex
//    characters, which never did). The after service refuses an address with 429 once it has
//    failed 30 times in a minute, so each flood is measured after a warm-up: answers by status,
//    key look-ups a second.
//
// PostgreSQL's statistics reach pg_stat_* from each backend at most once a second while it is
// busy, and 10 s after it falls idle (PGSTAT_IDLE_INTERVAL), so every reading waits SETTLE_MS
// after the load; each reading's own two transactions are taken off. Before any load the
// script reads twice with nothing in between: the calibration line says what idle looks like.
//
//   mkdir -p .bench/base && git archive <base commit> | tar -x -C .bench/base
//   node scripts/bench/auth.ts --base .bench/base --base-commit <base commit> [--quick]
//        [--after <checkout, default this one> --after-commit <its commit>]
//        [--engines sqlite,postgres,pgbouncer] [--rounds 5] [--seconds 3] [--flood-seconds 5]
//        [--connections 50] [--pets 1000000]
//
// An export under .bench/ runs on this checkout's node_modules (Node looks up the tree). The
// SQLite seed is npm run bench's (.bench/seed-<pets>-*.db), made here if missing; PostgreSQL is
// the test server (PETSTORE_TEST_POSTGRES_URL or 127.0.0.1:5432, trust auth) and PgBouncer a
// private instance (test/helpers/pgbouncer.ts). --quick: 1 round of 2 s, floods of 2 s, 10,000
// pets. The Markdown report goes to stdout, progress to stderr.
import { execFileSync, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { generateApiKey } from '../../src/contract/api-key.ts'
import { freePort } from '../../test/helpers/free-port.ts'
import { type PgBouncer, pgbouncerBinary, startPgBouncer } from '../../test/helpers/pgbouncer.ts'
import { ADMIN_URL, onDatabase, postgresReachable } from '../../test/helpers/postgres.ts'
import { type Request, requireWrk, sideBySideEnv, sideBySideRequests, wrkVersion } from './load.ts'
import { POOL_SIZE, seed as seedPostgres } from './postgres.ts'
import type { ServerProcess } from './processes.ts'
import { coreTicks, cpuSeconds, pinning, pinSelf, startServer, TASKSET } from './processes.ts'
import type { PairResult } from './report.ts'
import { pair } from './rounds.ts'
import { seededCopy, seed as seedSqlite } from './seed.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const BENCH_DIR = join(ROOT, '.bench')
const LUA_PATH = join(BENCH_DIR, 'auth.lua')

/** PGSTAT_IDLE_INTERVAL (10 s) and a margin: by then every backend has flushed its counts. */
const SETTLE_MS = 11_500
/**
 * Each reading of the statistics is two transactions on the database it reads: its connection's
 * start (the backend reads the catalogs in one) and its query.
 */
const READING_TRANSACTIONS = 2
/** More than one flood run sends (about 55,000 req/s at most here), so none repeats a token. */
const FLOOD_TOKENS = 400_000

const { values: args } = parseArgs({
  options: {
    base: { type: 'string' },
    'base-commit': { type: 'string' },
    after: { type: 'string' },
    'after-commit': { type: 'string' },
    quick: { type: 'boolean', default: false },
    engines: { type: 'string', default: 'sqlite,postgres,pgbouncer' },
    rounds: { type: 'string' },
    seconds: { type: 'string' },
    'flood-seconds': { type: 'string' },
    connections: { type: 'string', default: '50' },
    pets: { type: 'string' },
  },
})
if (args.base === undefined) {
  process.stderr.write(
    'usage: node scripts/bench/auth.ts --base <checkout of the base> [options]\n',
  )
  process.exit(2)
}
/** The two checkouts: the base, and this one unless --after names another (e.g. an export). */
const CHECKOUTS = {
  before: resolve(args.base),
  after: args.after === undefined ? ROOT : resolve(args.after),
}
const quick = args.quick
const settings = {
  rounds: Number(args.rounds ?? (quick ? 1 : 5)),
  seconds: Number(args.seconds ?? (quick ? 2 : 3)),
  warmupSeconds: quick ? 1 : 2,
  floodSeconds: Number(args['flood-seconds'] ?? (quick ? 2 : 5)),
  connections: Number(args.connections),
  pets: Number(args.pets ?? (quick ? 10_000 : 1_000_000)),
}
const engines = args.engines.split(',')
const progress = (line: string) => process.stderr.write(`${line}\n`)

type Side = 'before' | 'after'
const SIDES: readonly Side[] = ['before', 'after']

/** A running service, where its counter is read, and (PostgreSQL) its own database's URL. */
interface Service {
  server: ServerProcess
  metricsUrl: string
  statsUrl: string | undefined
}

/** One database path: both services on it, and the CLI-made key both accept. */
interface Setup {
  label: string
  postgres: boolean
  key: string
  services: Record<Side, Service>
}

// --- the services ---------------------------------------------------------------------------

/** Held in memory by both services and never sent: the requests carry the CLI-made key. */
const ENVIRONMENT_KEY = generateApiKey('production')

async function startService(
  side: Side,
  database: Parameters<typeof sideBySideEnv>[0]['database'],
  statsUrl?: string,
  extra: Record<string, string> = {},
): Promise<Service> {
  const checkout = CHECKOUTS[side]
  const metricsPort = await freePort()
  const server = await startServer(
    side,
    [join(checkout, 'bin/petstore.js'), 'serve'],
    {
      ...sideBySideEnv({ key: ENVIRONMENT_KEY, database }),
      METRICS_PORT: String(metricsPort),
      ...extra,
    },
    '/readyz',
  )
  return { server, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`, statsUrl }
}

/** `petstore keys create`, the after checkout's, on `databaseUrl`: the key it prints once. */
function createKey(databaseUrl: string): string {
  const printed = execFileSync(
    process.execPath,
    [join(CHECKOUTS.after, 'bin/petstore.js'), 'keys', 'create', '--name', 'bench'],
    { env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl }, encoding: 'utf8' },
  )
  return printed.trim()
}

// --- SQLite ---------------------------------------------------------------------------------

async function ensureSqliteSeed(pets: number): Promise<void> {
  mkdirSync(BENCH_DIR, { recursive: true })
  const present = readdirSync(BENCH_DIR).some(
    (file) => file.startsWith(`seed-${pets}-`) && file.endsWith('.db'),
  )
  if (present) return
  progress(`SQLite: seeding ${pets.toLocaleString('en')} pets into .bench/seed-${pets}-auth.db…`)
  await seedSqlite(pets, join(BENCH_DIR, `seed-${pets}-auth.db`))
}

/** A copy of the seed with one CLI-made key in it, then a copy of that for each service. */
async function sqliteSetup(): Promise<Setup> {
  await ensureSqliteSeed(settings.pets)
  const keyed = seededCopy(BENCH_DIR, settings.pets, 'auth-keyed')
  const key = createKey(`sqlite:${keyed}`)
  const services = {} as Record<Side, Service>
  for (const side of SIDES) {
    const copy = join(BENCH_DIR, `auth-${side}.db`)
    for (const suffix of ['', '-wal', '-shm']) {
      rmSync(copy + suffix, { force: true })
      if (suffix !== '-shm' && existsSync(keyed + suffix))
        copyFileSync(keyed + suffix, copy + suffix)
    }
    services[side] = await startService(side, { sqliteCopy: copy })
  }
  return { label: 'SQLite', postgres: false, key, services }
}

// --- PostgreSQL -----------------------------------------------------------------------------

interface PostgresDatabases {
  key: string
  urls: Record<Side, string>
  drop(): Promise<void>
}

function databaseUrl(name: string): string {
  const url = new URL(ADMIN_URL)
  url.pathname = `/${name}`
  return url.toString()
}

/** One seeded database with one CLI-made key, cloned once for each service. */
async function postgresDatabases(): Promise<PostgresDatabases> {
  const prefix = `petstore_bench_auth_${randomBytes(4).toString('hex')}`
  const names = [`${prefix}_seed`, `${prefix}_before`, `${prefix}_after`]
  const admin = (sql: string) => onDatabase(ADMIN_URL, (client) => client.query(sql))
  const drop = async () => {
    for (const name of names) await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  }
  try {
    await admin(`CREATE DATABASE ${prefix}_seed`)
    progress(`PostgreSQL: seeding ${settings.pets.toLocaleString('en')} pets into ${prefix}_seed…`)
    await seedPostgres(databaseUrl(`${prefix}_seed`), settings.pets)
    const key = createKey(databaseUrl(`${prefix}_seed`))
    for (const side of SIDES)
      await admin(`CREATE DATABASE ${prefix}_${side} TEMPLATE ${prefix}_seed`)
    const urls = { before: databaseUrl(`${prefix}_before`), after: databaseUrl(`${prefix}_after`) }
    return { key, urls, drop }
  } catch (err) {
    await drop()
    throw err
  }
}

async function postgresSetup(
  databases: PostgresDatabases,
  bouncer: PgBouncer | undefined,
): Promise<Setup> {
  const services = {} as Record<Side, Service>
  for (const side of SIDES) {
    const url = databases.urls[side]
    services[side] =
      bouncer === undefined
        ? await startService(side, { url, poolSize: POOL_SIZE }, url)
        : await startService(side, { url: bouncer.through(url), poolSize: POOL_SIZE }, url, {
            DATABASE_POOLER: 'transaction',
          })
  }
  const label = bouncer === undefined ? 'PostgreSQL, direct' : 'PostgreSQL, PgBouncer'
  return { label, postgres: true, key: databases.key, services }
}

// --- counting what the store was asked ------------------------------------------------------

interface Counts {
  /** petstore_api_key_lookups_total over its results; undefined where the service has none. */
  lookups: number | undefined
  /** PostgreSQL: the transactions of the service's database, and the scans of its api_keys. */
  transactions: number | undefined
  keyScans: number | undefined
}

const STATS_SQL = `SELECT
  (SELECT xact_commit + xact_rollback FROM pg_stat_database
    WHERE datname = current_database()) AS transactions,
  (SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables
    WHERE relname = 'api_keys') AS key_scans`

async function lookupCounter(metricsUrl: string): Promise<number | undefined> {
  // A kept-alive connection may have been closed by the server while wrk ran (spawnSync holds
  // this event loop meanwhile): then once more, on a new one.
  const scrape = async () => (await fetch(metricsUrl)).text()
  const text = await scrape().catch(scrape)
  const values = [...text.matchAll(/^petstore_api_key_lookups_total\{[^}]*\} (\S+)$/gm)]
  return values.length === 0 ? undefined : values.reduce((sum, m) => sum + Number(m[1]), 0)
}

async function countsOf(service: Service): Promise<Counts> {
  const lookups = await lookupCounter(service.metricsUrl)
  if (service.statsUrl === undefined)
    return { lookups, transactions: undefined, keyScans: undefined }
  const row = await onDatabase(service.statsUrl, async (c) => (await c.query(STATS_SQL)).rows[0])
  return { lookups, transactions: Number(row.transactions), keyScans: Number(row.key_scans) }
}

type Delta = Counts

function delta(from: Counts, to: Counts): Delta {
  const minus = (a: number | undefined, b: number | undefined, own = 0) =>
    a === undefined || b === undefined ? undefined : b - a - own
  return {
    lookups: minus(from.lookups, to.lookups),
    transactions: minus(from.transactions, to.transactions, READING_TRANSACTIONS),
    keyScans: minus(from.keyScans, to.keyScans),
  }
}

/**
 * Readings of both services' counts, each `since()` what changed since the one before; on
 * PostgreSQL each waits until the statistics have settled.
 */
async function storeMeter(setup: Setup) {
  const read = async () => {
    if (setup.postgres) await sleep(SETTLE_MS)
    const entries = SIDES.map(async (side) => [side, await countsOf(setup.services[side])] as const)
    return Object.fromEntries(await Promise.all(entries)) as Record<Side, Counts>
  }
  let last = await read()
  return {
    async since(): Promise<Record<Side, Delta>> {
      const now = await read()
      const changed = {
        before: delta(last.before, now.before),
        after: delta(last.after, now.after),
      }
      last = now
      return changed
    },
  }
}

// --- wrk with a token per request -----------------------------------------------------------

/** wrk's script: a bearer token from a file on each request, answers counted by status. */
const LUA = `-- Written by scripts/bench/auth.ts: GET with the next token of a file (args[1]) from an
-- offset (args[2]) on each request, cycling; done() prints auth-summary {...}, with wrk's own CPU
-- time (os.clock) from the end of init() on.
local tokens, head, tail, at = {}, "", "", 1
statuses = {}
clock_at_start = 0

function init(args)
  for line in io.lines(args[1]) do
    tokens[#tokens + 1] = line
  end
  at = tonumber(args[2]) % #tokens + 1
  local headers = {}
  for name, value in pairs(wrk.headers) do
    headers[name] = value
  end
  headers["Authorization"] = "Bearer @TOKEN@"
  local bytes = wrk.format(nil, nil, headers, nil)
  local from = string.find(bytes, "@TOKEN@", 1, true)
  head = string.sub(bytes, 1, from - 1)
  tail = string.sub(bytes, from + 7)
  clock_at_start = os.clock()
end

function request()
  local token = tokens[at]
  at = at % #tokens + 1
  return head .. token .. tail
end

-- Called in the main state once for each thread, which done() then asks for its counts.
local workers = {}
function setup(thread)
  workers[#workers + 1] = thread
end

function response(status)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency)
  local counts, started, parts = {}, 0, {}
  for _, thread in ipairs(workers) do
    for status, n in pairs(thread:get("statuses")) do
      counts[status] = (counts[status] or 0) + n
    end
    started = math.max(started, thread:get("clock_at_start"))
  end
  for status, n in pairs(counts) do
    parts[#parts + 1] = string.format('"%d":%d', status, n)
  end
  local e = summary.errors
  io.write(string.format(
    'auth-summary {"requests":%d,"durationUs":%d,"errors":%d,"p99Us":%d,"wrkCpuSeconds":%.3f,"statuses":{%s}}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout,
    latency:percentile(99), os.clock() - started, table.concat(parts, ",")))
end
`

/** A file of tokens for wrk, and how far the runs so far have read into it. */
interface Tokens {
  path: string
  used: number
}

function tokenFile(name: string, tokens: string[]): Tokens {
  const path = join(BENCH_DIR, `auth-tokens-${name}.txt`)
  writeFileSync(path, `${tokens.join('\n')}\n`)
  return { path, used: 0 }
}

/** One run of wrk against one service. */
interface Driven {
  requests: number
  seconds: number
  statuses: Record<string, number>
  errors: number
  p99: number
  cpuUsPerRequest: number
  /** wrk's own CPU time ÷ the run's: well below 1, wrk had room to spare. */
  wrkBusy: number
  /** The load core's busy share, whoever used it (PostgreSQL is not pinned). */
  loadCoreBusy: number
}

function drive(server: ServerProcess, path: string, tokens: Tokens, seconds: number): Driven {
  const wrkArgs = [
    '-t1',
    `-c${settings.connections}`,
    `-d${Math.max(1, Math.round(seconds))}s`,
    '--latency',
    '--timeout',
    '10s',
    '-s',
    LUA_PATH,
    server.url + path,
    '--',
    tokens.path,
    String(tokens.used),
  ]
  const wrk = requireWrk()
  const [file, ...rest] = pinning
    ? [TASKSET, '-c', pinning.load, wrk, ...wrkArgs]
    : [wrk, ...wrkArgs]
  const cpuBefore = cpuSeconds(server.pid)
  const coreBefore = pinning ? coreTicks(pinning.load) : undefined
  const run = spawnSync(file as string, rest, { encoding: 'utf8' })
  const coreAfter = pinning ? coreTicks(pinning.load) : undefined
  const cpu = cpuSeconds(server.pid) - cpuBefore
  const line = /^auth-summary (.+)$/m.exec(run.stdout)?.[1]
  if (line === undefined) throw new Error(`wrk ${wrkArgs.join(' ')}:\n${run.stdout}${run.stderr}`)
  const summary = JSON.parse(line) as {
    requests: number
    durationUs: number
    errors: number
    p99Us: number
    wrkCpuSeconds: number
    statuses: Record<string, number>
  }
  tokens.used += summary.requests
  const runSeconds = summary.durationUs / 1e6
  return {
    requests: summary.requests,
    seconds: runSeconds,
    statuses: summary.statuses,
    errors: summary.errors,
    p99: summary.p99Us / 1000,
    cpuUsPerRequest: (cpu * 1e6) / summary.requests,
    wrkBusy: summary.wrkCpuSeconds / runSeconds,
    loadCoreBusy:
      coreBefore && coreAfter
        ? (coreAfter.busy - coreBefore.busy) / (coreAfter.total - coreBefore.total)
        : Number.NaN,
  }
}

function driveBoth(setup: Setup, path: string, tokens: Tokens, seconds: number) {
  const before = drive(setup.services.before.server, path, tokens, seconds)
  const after = drive(setup.services.after.server, path, tokens, seconds)
  return { before, after }
}

// --- the measurements -----------------------------------------------------------------------

const OPERATIONS = (() => {
  const requests = sideBySideRequests(settings.pets)
  return [
    { label: 'getPet', request: requests.get as Request },
    { label: 'listPets `limit=20`', request: requests.list20 as Request },
  ]
})()

interface Counted {
  driven: Record<Side, Driven>
  delta: Record<Side, Delta>
}

interface OperationResult extends Counted {
  label: string
  rounds: Omit<PairResult, 'scenario' | 'label'>
}

interface FloodResult extends Counted {
  label: string
  wellFormed: boolean
  warmUp: Record<Side, Driven>
}

interface SetupResult {
  label: string
  postgres: boolean
  idle: Record<Side, Delta>
  operations: OperationResult[]
  floods: FloodResult[]
}

interface FloodTokens {
  label: string
  tokens: Tokens
  /** Whether the base asked the store for each (well-formed keys) or for none (opaque tokens). */
  wellFormed: boolean
}

async function benchSetup(setup: Setup, floods: FloodTokens[]): Promise<SetupResult> {
  const meter = await storeMeter(setup)
  const idle = await meter.since()
  const rounds = await keyRounds(setup)
  await meter.since()
  const operations = await countedRuns(setup, meter, rounds)
  const floodResults: FloodResult[] = []
  for (const flood of floods) floodResults.push(await floodRun(setup, meter, flood))
  return { label: setup.label, postgres: setup.postgres, idle, operations, floods: floodResults }
}

/** Each operation with the CLI-made key, before and after in alternating rounds. */
async function keyRounds(setup: Setup): Promise<OperationResult['rounds'][]> {
  const { before, after } = setup.services
  const roundSettings = { ...settings, key: setup.key, log: progress }
  const rounds = []
  for (const { label, request } of OPERATIONS) {
    progress(`${setup.label}: ${label}, the CLI-made key, before vs after`)
    const { connections } = settings
    rounds.push(await pair(roundSettings, label, request, connections, after.server, before.server))
  }
  return rounds
}

type Meter = Awaited<ReturnType<typeof storeMeter>>

/** One more run of each operation on each service alone, and what the store was asked. */
async function countedRuns(
  setup: Setup,
  meter: Meter,
  rounds: OperationResult['rounds'][],
): Promise<OperationResult[]> {
  const keyFile = tokenFile(`key-${setup.postgres ? 'postgres' : 'sqlite'}`, [setup.key])
  const operations: OperationResult[] = []
  for (const [i, { label, request }] of OPERATIONS.entries()) {
    progress(`${setup.label}: ${label}, counting what the store is asked`)
    const driven = driveBoth(setup, request.path, keyFile, settings.seconds)
    for (const side of SIDES) requireAll200(driven[side], `${setup.label} ${label} ${side}`)
    const counted = { driven, delta: await meter.since() }
    operations.push({ label, rounds: rounds[i] as OperationResult['rounds'], ...counted })
  }
  return operations
}

/** A warm-up of the flood on each service, then the measured flood and what the store was asked. */
async function floodRun(setup: Setup, meter: Meter, flood: FloodTokens): Promise<FloodResult> {
  const { label, tokens, wellFormed } = flood
  await awaitWholeWindow(setup)
  progress(`${setup.label}: a flood of ${label}`)
  const path = OPERATIONS[0]?.request.path ?? '/v1/pets'
  const warmUp = driveBoth(setup, path, tokens, settings.warmupSeconds)
  await meter.since()
  const driven = driveBoth(setup, path, tokens, settings.floodSeconds)
  return { label, wellFormed, warmUp, driven, delta: await meter.since() }
}

/**
 * The after service counts failures per address in whole minutes of the clock: when the minute
 * would turn between its warm-up and the end of its measured flood, waits for the next one, so
 * that the measured flood sees the address refused throughout (a new minute lets 30 through).
 */
async function awaitWholeWindow(setup: Setup): Promise<void> {
  const { warmupSeconds, floodSeconds } = settings
  const needMs =
    (2 * warmupSeconds + 2 * floodSeconds + 3) * 1000 + (setup.postgres ? SETTLE_MS : 0)
  const leftMs = 60_000 - (Date.now() % 60_000)
  if (leftMs < needMs) await sleep(leftMs + 200)
}

function requireAll200(driven: Driven, what: string): void {
  const ok = driven.statuses['200'] ?? 0
  if (ok !== driven.requests || driven.errors > 0) {
    throw new Error(`${what}: not every answer was 200: ${JSON.stringify(driven.statuses)}`)
  }
}

async function runSetup(
  start: () => Promise<Setup>,
  floods: FloodTokens[],
  results: SetupResult[],
): Promise<void> {
  const setup = await start()
  try {
    results.push(await benchSetup(setup, floods))
  } finally {
    await Promise.all(SIDES.map((side) => setup.services[side].server.stop()))
  }
}

async function runPostgres(floods: FloodTokens[], results: SetupResult[]): Promise<void> {
  if (!(await postgresReachable())) {
    progress(`PostgreSQL is not reachable at ${new URL(ADMIN_URL).host}: no PostgreSQL runs`)
    return
  }
  const databases = await postgresDatabases()
  let bouncer: PgBouncer | undefined
  try {
    if (engines.includes('postgres')) {
      await runSetup(() => postgresSetup(databases, undefined), floods, results)
    }
    if (engines.includes('pgbouncer')) {
      if (pgbouncerBinary() === undefined) progress('PgBouncer is not installed: no PgBouncer run')
      else {
        bouncer = await startPgBouncer({ poolSize: POOL_SIZE })
        await runSetup(() => postgresSetup(databases, bouncer), floods, results)
      }
    }
  } finally {
    await bouncer?.stop()
    await databases.drop()
  }
}

// --- the report -----------------------------------------------------------------------------

const int = (n: number) => Math.round(n).toLocaleString('en')

/** Per request: two decimals, or two significant digits below 0.01. */
function per(count: number | undefined, requests: number): string {
  if (count === undefined) return '–'
  const value = count / requests
  return value === 0 || value >= 0.01 ? value.toFixed(2) : value.toPrecision(2)
}

function statusList(statuses: Record<string, number>): string {
  return Object.entries(statuses)
    .sort(([a], [b]) => Number(a) - Number(b))
    .map(([status, n]) => `${status} × ${int(n)}`)
    .join(', ')
}

/**
 * A checkout's commit: its own repository's (with a word on uncommitted changes to what the
 * service runs), else what --base-commit or --after-commit says (an export has no repository).
 */
function commitOf(side: Side): string {
  const dir = CHECKOUTS[side]
  const given = side === 'before' ? args['base-commit'] : args['after-commit']
  if (!existsSync(join(dir, '.git'))) return given ?? 'not given'
  const git = (...rest: string[]) =>
    execFileSync('git', ['-C', dir, ...rest], { encoding: 'utf8' }).trim()
  const dirty = git('status', '--porcelain', '--untracked-files=no', '--', 'src', 'bin') !== ''
  return `${git('rev-parse', '--short', 'HEAD')}${dirty ? ' with uncommitted changes to src/ or bin/' : ''}`
}

async function versions(): Promise<string> {
  const parts = [`Node.js ${process.version}`, `wrk ${wrkVersion()}`]
  if (engines.some((e) => e !== 'sqlite') && (await postgresReachable())) {
    const row = await onDatabase(
      ADMIN_URL,
      async (c) => (await c.query('SHOW server_version')).rows[0],
    )
    parts.push(`PostgreSQL ${String(row.server_version).split(' ')[0]}`)
    const binary = pgbouncerBinary()
    if (binary !== undefined) {
      parts.push(execFileSync(binary, ['--version'], { encoding: 'utf8' }).split('\n')[0] ?? '')
    }
  }
  return parts.join(', ')
}

/** The load core's busy share in the busiest run of the rounds (shared with PostgreSQL). */
function busiest(rounds: OperationResult['rounds']): number {
  return Math.max(
    ...rounds.rounds.flatMap((r) => [r.service.loadCoreBusy, r.baseline.loadCoreBusy]),
  )
}

function keyTable(results: SetupResult[]): string[] {
  const rows = [
    '| Database | Operation | req/s before → after | CPU µs/req before → after | p99 ms before → after | round trips/req before → after | key look-ups/req before → after | load core, busiest round |',
    '|---|---|--:|--:|--:|--:|--:|--:|',
  ]
  for (const r of results) {
    for (const op of r.operations) {
      const { baseline: b, service: a, ratio } = op.rounds
      const lookups = (side: Side) =>
        r.postgres
          ? per(op.delta[side].keyScans, op.driven[side].requests)
          : side === 'before'
            ? '1 ¹'
            : `${per(op.delta.after.lookups, op.driven.after.requests)} ²`
      rows.push(
        `| ${r.label} | ${op.label} | ${int(b.rps)} → ${int(a.rps)} (**${ratio.rps.toFixed(2)}×**) | ${b.cpuUsPerRequest.toFixed(1)} → ${a.cpuUsPerRequest.toFixed(1)} | ${b.p99.toFixed(2)} → ${a.p99.toFixed(2)} | ${r.postgres ? `${per(op.delta.before.transactions, op.driven.before.requests)} → ${per(op.delta.after.transactions, op.driven.after.requests)}` : '–'} | ${lookups('before')} → ${lookups('after')} | ${Math.round(busiest(op.rounds) * 100)}% |`,
      )
    }
  }
  return rows
}

function countTable(results: SetupResult[]): string[] {
  const rows = [
    '| Database | Operation | Service | requests | transactions | api_keys scans | look-up counter | wrk CPU |',
    '|---|---|---|--:|--:|--:|--:|--:|',
  ]
  const n = (value: number | undefined) => (value === undefined ? '–' : int(value))
  for (const r of results) {
    for (const op of r.operations) {
      for (const side of SIDES) {
        const d = op.delta[side]
        const driven = op.driven[side]
        rows.push(
          `| ${r.label} | ${op.label} | ${side} | ${int(driven.requests)} | ${n(d.transactions)} | ${n(d.keyScans)} | ${n(d.lookups)} | ${Math.round(driven.wrkBusy * 100)}% |`,
        )
      }
    }
  }
  return rows
}

function floodTable(results: SetupResult[]): string[] {
  const rows = [
    '| Database | Tokens | Service | req/s | answers in the warm-up | answers measured | key look-ups/s in the store | look-up counter /s | transactions/s | CPU µs/req | wrk CPU (load core) |',
    '|---|---|---|--:|---|---|--:|--:|--:|--:|--:|',
  ]
  const rate = (count: number | undefined, seconds: number) =>
    count === undefined ? '–' : int(count / seconds)
  for (const r of results) {
    for (const flood of r.floods) {
      for (const side of SIDES) {
        const d = flood.delta[side]
        const run = flood.driven[side]
        // SQLite's base has no counter: one look-up for each well-formed token it refused.
        const byConstruction = flood.wellFormed ? (run.statuses['401'] ?? 0) : 0
        const inStore = r.postgres
          ? rate(d.keyScans, run.seconds)
          : side === 'before'
            ? `${rate(byConstruction, run.seconds)} ¹`
            : '–'
        rows.push(
          `| ${r.label} | ${flood.label} | ${side} | ${int(run.requests / run.seconds)} | ${statusList(flood.warmUp[side].statuses)} | ${statusList(run.statuses)} | ${inStore} | ${rate(d.lookups, run.seconds)} | ${rate(d.transactions, run.seconds)} | ${run.cpuUsPerRequest.toFixed(1)} | ${Math.round(run.wrkBusy * 100)}% (${Math.round(run.loadCoreBusy * 100)}%) |`,
        )
      }
    }
  }
  return rows
}

function idleLines(results: SetupResult[]): string[] {
  return results
    .filter((r) => r.postgres)
    .map((r) => {
      const idle = SIDES.map(
        (side) =>
          `${side} ${r.idle[side].transactions} transactions and ${r.idle[side].keyScans} api_keys scans`,
      )
      return `- ${r.label}, two readings with no load between them (the readings' own transactions taken off): ${idle.join('; ')}.`
    })
}

interface Header {
  date: Date
  seconds: number
  commits: Record<Side, string>
  versions: string
}

function render(results: SetupResult[], header: Header) {
  const { rounds, seconds, warmupSeconds, floodSeconds, connections, pets } = settings
  return [
    `\`node scripts/bench/auth.ts ${process.argv.slice(2).join(' ')}\`, ${header.date.toISOString().slice(0, 16).replace('T', ' ')} UTC (${quick ? 'quick' : 'full'}, ${header.seconds} s): before = ${header.commits.before}, after = ${header.commits.after}; ${header.versions}.`,
    '',
    `${int(pets)} pets; each service on its own copy (SQLite) or clone (PostgreSQL) of one seed holding one key made by \`petstore keys create\`, which every request carries. The after service runs with the defaults (\`PETSTORE_KEY_CACHE_MS=1000\`, \`PETSTORE_AUTH_FAILURE_LIMIT=30\`); both with \`PETSTORE_RATE_LIMIT=0\`, \`LOG_LEVEL=warn\`, metrics on, \`DATABASE_POOL_SIZE=${POOL_SIZE}\` on PostgreSQL (PgBouncer: transaction mode, \`default_pool_size = ${POOL_SIZE}\`, \`DATABASE_POOLER=transaction\`). The services on core 0, wrk (one thread, ${connections} connections) on core 1; PostgreSQL and PgBouncer not pinned. ${rounds} alternating round${rounds === 1 ? '' : 's'} of ${seconds} s after ${warmupSeconds} s of warm-up each; medians, and the median of the per-round ratios after ÷ before.`,
    '',
    "**A key made by the CLI.** req/s, CPU and p99 from the rounds; round trips and look-ups from one more run of each service alone, counted at the server on PostgreSQL (transactions of its database; scans of `api_keys`). The load core is wrk's, which PostgreSQL and PgBouncer share; wrk's own CPU is in the next table:",
    '',
    ...keyTable(results),
    '',
    "¹ The base has no look-up counter; it looks a stored key up on every request by construction (`keys/verifier.ts` at the base: every structured key not from the environment goes to `findActiveByHash`). ² The after service's `petstore_api_key_lookups_total`.",
    '',
    `The counting runs (${seconds} s of each service alone), as counted: transactions of the service's database and scans of its \`api_keys\` from PostgreSQL's statistics, each reading ${SETTLE_MS / 1000} s after the load so that every backend has reported; the service's own counter beside them. The counts may pass wrk's requests by up to the ${connections} connections: wrk does not count the answers in flight when it stops.`,
    '',
    ...countTable(results),
    '',
    ...idleLines(results),
    '',
    `**A flood of refused tokens** from one client address, a new token on every request (${int(FLOOD_TOKENS)} made beforehand, read in turn, more than a run sends): well-formed keys (\`generateApiKey('production')\`: the live prefix and a right checksum, never stored) and opaque tokens (40 random hex characters). ${warmupSeconds} s of warm-up on each service, then ${floodSeconds} s measured; the after service's failure count per address is kept per minute, so the warm-up spends its 30 failures, and a flood waits for the next minute if this one would end before the after service's measured seconds do (a new minute lets 30 more through, with their look-ups). Look-ups in the store are scans of \`api_keys\` (PostgreSQL); on SQLite the after service's counter, and the base's by construction (¹: each well-formed token it refuses, none of the opaque ones):`,
    '',
    ...floodTable(results),
  ].join('\n')
}

// --- the run --------------------------------------------------------------------------------

async function main(): Promise<void> {
  requireWrk()
  pinSelf()
  mkdirSync(BENCH_DIR, { recursive: true })
  writeFileSync(LUA_PATH, LUA)
  const date = new Date()
  const started = performance.now()
  const commits = { before: commitOf('before'), after: commitOf('after') }
  const floods: FloodTokens[] = [
    {
      label: 'well-formed keys',
      wellFormed: true,
      tokens: tokenFile(
        'well-formed',
        Array.from({ length: FLOOD_TOKENS }, () => generateApiKey('production')),
      ),
    },
    {
      label: 'opaque tokens',
      wellFormed: false,
      tokens: tokenFile(
        'opaque',
        Array.from({ length: FLOOD_TOKENS }, () => randomBytes(20).toString('hex')),
      ),
    },
  ]
  const results: SetupResult[] = []
  if (engines.includes('sqlite')) await runSetup(sqliteSetup, floods, results)
  if (engines.some((e) => e === 'postgres' || e === 'pgbouncer')) await runPostgres(floods, results)
  const header = {
    date,
    commits,
    seconds: Math.round((performance.now() - started) / 1000),
    versions: await versions(),
  }
  process.stdout.write(`${render(results, header)}\n`)
}

await main()
