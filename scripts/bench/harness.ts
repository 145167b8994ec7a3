// What every scenario of `npm run bench` shares: the operations it measures, the servers under
// test (the service as an operator runs it, or a reference script; pinned to one core where
// taskset exists), one measured run of wrk against one of them, alternating rounds of several
// under the same load with their medians, and the check that a reference answers as the service
// does. A scenario adds only what it compares and how it reports it.
//
// wrk and not a Node.js load generator, so that the load generator is never in question: it is
// what an outside measurement uses, and it has room to spare (docs/benchmarks.md, "Load"). Each
// run records how busy the load core was, so a report shows the load generator was not the limit.
import { type ChildProcess, execFile, execFileSync, spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { type Agent, request as httpRequest } from 'node:http'
import { delimiter, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { encodeCursor } from '../../src/http/routes/cursor.ts'
import { freePort } from '../../test/helpers/free-port.ts'

export const ROOT = fileURLToPath(new URL('../../', import.meta.url))
export const BENCH_DIR = join(ROOT, '.bench')
export const log = (line: string) => process.stdout.write(`${line}\n`)

// --- operations and settings -------------------------------------------------------------------
export interface Request {
  method: 'GET' | 'POST'
  path: string
  body?: string
  /** D14: a new Idempotency-Key on every request (never a replay). */
  idempotencyKey?: boolean
}

export type Operation = { id: string; label: string; request: Request }

/**
 * The operations a scenario can measure, by the names --only takes (in its order; all without
 * it), on a seed of `pets`: getPet reads the middle pet, the deep page starts 9/10 of the way in.
 */
export function selectOperations(pets: number, only: string | undefined): Operation[] {
  const deepAfter = pets - pets / 10
  const get = (path: string): Request => ({ method: 'GET', path })
  const body = JSON.stringify({ name: 'Benchmark Bella', categoryId: 42, status: 'available' })
  const create = (idempotencyKey: boolean) =>
    ({ method: 'POST', path: '/v1/pets', body, idempotencyKey }) as const
  const all: [string, string, Request][] = [
    ['list20', 'listPets `limit=20`', get('/v1/pets?limit=20')],
    ['list100', 'listPets `limit=100`', get('/v1/pets?limit=100')],
    ['status', 'listPets `limit=20&status=available`', get('/v1/pets?limit=20&status=available')],
    [
      'deep',
      `listPets deep cursor page (after id ${deepAfter.toLocaleString('en')})`,
      get(`/v1/pets?limit=20&cursor=${encodeCursor(deepAfter)}`),
    ],
    ['get', 'getPet', get(`/v1/pets/${pets / 2}`)],
    ['create', 'createPet (durable)', create(false)],
    ['createKeyed', 'createPet (durable), a new `Idempotency-Key` each', create(true)],
  ]
  const operations = all.map(([id, label, request]) => ({ id, label, request }))
  return (only?.split(',') ?? operations.map((o) => o.id)).map((id) => {
    const found = operations.find((operation) => operation.id === id)
    if (found === undefined) throw new Error(`no operation ${id}: ${operations.map((o) => o.id)}`)
    return found
  })
}

/** The settings of the main run, SQLite and PostgreSQL alike (run.ts makes them). */
export type RunSettings = RoundSettings & {
  mode: 'quick' | 'full'
  pets: number
  smallPets: number
  connections: number[]
  /** --only's operations, or undefined for all. */
  only: string | undefined
  /** The service run with --cpu-prof, its profiles in .bench/profiles. */
  profile: boolean
  /** `<outBase>.md` gets the sections, `<outBase>.json` and `<outBase>-postgres.json` figures. */
  outBase: string
}

/** --env NAME=VALUE settings, as an environment. */
export function envSettings(settings: readonly string[]): Record<string, string> {
  return Object.fromEntries(
    settings.map((setting) => {
      const at = setting.indexOf('=')
      if (at < 1) throw new Error(`--env takes NAME=VALUE, not ${setting}`)
      return [setting.slice(0, at), setting.slice(at + 1)]
    }),
  )
}

// --- servers -------------------------------------------------------------------------------------
export const TASKSET = '/usr/bin/taskset'

/** Cores: servers on the first, the load generator on the second (when there are two). */
export const pinning = existsSync(TASKSET) ? { server: '0', load: '1' } : undefined

/** Pins this process (all its threads) to the load generator's core. */
export function pinSelf(): void {
  if (pinning) execFileSync(TASKSET, ['-a', '-cp', pinning.load, String(process.pid)])
}

export type ServerProcess = { name: string; url: string; pid: number; stop(): Promise<void> }

/** Waits until `url` answers below 500; fails once `child` exits or after `timeoutMs`. */
export async function waitUntilReady(
  url: string,
  child: ChildProcess,
  timeoutMs: number,
  describe: () => string,
): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; ; ) {
    if (child.exitCode !== null) throw new Error(`exited before it was ready: ${describe()}`)
    try {
      const response = await fetch(url)
      await response.body?.cancel()
      if (response.status < 500) return
    } catch {}
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`not ready within ${timeoutMs / 1000} s: ${describe()}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/**
 * Starts `node <args>` pinned to the server core, and waits until `readyPath` answers. `node` is
 * the Node.js running the harness unless another binary is given (e.g. the maintenance line's).
 */
export async function startServer(
  name: string,
  nodeArgs: string[],
  env: Record<string, string>,
  readyPath: string,
  node = process.execPath,
): Promise<ServerProcess> {
  const port = await freePort()
  const command = [node, ...nodeArgs]
  const [file, ...args] = pinning ? [TASKSET, '-c', pinning.server, ...command] : command
  const child = spawn(file as string, args, {
    env: { PATH: process.env.PATH ?? '', ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let stderr = ''
  child.stderr?.on('data', (chunk) => {
    stderr += chunk
  })
  const exited = once(child, 'exit')
  const url = `http://127.0.0.1:${port}`
  await waitUntilReady(url + readyPath, child, 60_000, () => `${name}\n${stderr}`)
  return {
    name,
    url,
    // taskset execs node in place, so the child's pid is the server's.
    pid: child.pid ?? 0,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
      await exited
      clearTimeout(timer)
    },
  }
}

/** Where the service keeps its pets: a SQLite file, or a PostgreSQL database through a pool. */
export type Database = { sqlite: string } | { url: string; poolSize: number }

/**
 * The service's environment as an operator runs it: its database, a key in PETSTORE_API_KEYS,
 * no rate limit, problems logged and metrics taken (on a free port); LOG_LEVEL and METRICS_PORT
 * from this environment when set, to measure what they cost (LOG_LEVEL=info, METRICS_PORT=off).
 * `settings` last: what a scenario sets of its own (load shedding, a probe port, …).
 */
export function serviceEnv(
  key: string,
  database: Database,
  settings: Record<string, string> = {},
): Record<string, string> {
  return {
    ...('url' in database
      ? { DATABASE_URL: database.url, DATABASE_POOL_SIZE: String(database.poolSize) }
      : { DATABASE_URL: `sqlite:${database.sqlite}` }),
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
    METRICS_PORT: process.env.METRICS_PORT ?? '0',
    PETSTORE_RATE_LIMIT: '0',
    PETSTORE_API_KEYS: key,
    ...settings,
  }
}

/** `bin/petstore.js serve` of a checkout (this one unless given), ready once /readyz answers. */
export function startService(
  name: string,
  env: Record<string, string>,
  options: { checkout?: string; nodeArgs?: string[]; node?: string } = {},
): Promise<ServerProcess> {
  const serve = [...(options.nodeArgs ?? []), join(options.checkout ?? ROOT, 'bin/petstore.js')]
  return startServer(name, [...serve, 'serve'], env, '/readyz', options.node)
}

/**
 * A reference of scripts/bench (e.g. same-bytes.ts) on `database`, expecting `key`, checked to
 * answer each of `checked` as `service` does.
 */
export async function startReference(
  name: string,
  script: string,
  database: string,
  options: { key: string; service: ServerProcess; checked: Operation[] },
  env: Record<string, string> = {},
): Promise<ServerProcess> {
  const { key, service, checked } = options
  const path = join(ROOT, 'scripts/bench', script)
  const server = await startServer(
    name,
    [path, database],
    { BENCH_AUTHORIZATION: `Bearer ${key}`, ...env },
    '/',
  )
  for (const { request } of checked) {
    const ours = await fetchAnswer(key, service.url, request)
    checkSameAnswer(name, request, ours, await fetchAnswer(key, server.url, request))
  }
  return server
}

/** Awaits each server started into `running`, so that a failure part-way still stops them all. */
export const keeper = (running: ServerProcess[]) => async (starting: Promise<ServerProcess>) => {
  running.push(await starting)
  return running.at(-1) as ServerProcess
}

export const stopAll = (servers: readonly ServerProcess[]) =>
  Promise.all(servers.map((server) => server.stop()))

// --- a reference's answers checked against the service's -----------------------------------------
type Answer = { status: number; body: string; headers: Headers }

/** Checks get a new Idempotency-Key each, never a replay. */
let checkKeys = 0

/**
 * One request with the headers wrk sends (node:http: fetch would add an Accept-Encoding, and get
 * a compressed answer with other headers than wrk's), on `agent`'s connections if given.
 */
export function fetchAnswer(
  key: string,
  url: string,
  request: Request,
  agent?: Agent,
): Promise<Answer> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${key}`,
    ...(request.method === 'POST' ? { 'content-type': 'application/json' } : {}),
    ...(request.idempotencyKey
      ? { 'idempotency-key': `check-${process.pid}-${Date.now()}-${++checkKeys}` }
      : {}),
  }
  return new Promise((resolve, reject) => {
    httpRequest(url + request.path, { method: request.method, headers, agent }, (response) => {
      let body = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => {
        body += chunk
      })
      response.on('end', () => {
        const received = new Headers()
        for (const [name, value] of Object.entries(response.headers)) {
          if (value !== undefined)
            received.set(name, Array.isArray(value) ? value.join(', ') : value)
        }
        resolve({ status: response.statusCode ?? 0, body, headers: received })
      })
    })
      .on('error', reject)
      .end(request.body)
  })
}

/** Headers whose values differ from answer to answer, on every answer and on a create's. */
const PER_ANSWER = new Set(['x-request-id', 'date'])
const PER_CREATE = new Set([...PER_ANSWER, 'location', 'content-length'])
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/**
 * Throws unless `theirs` is the service's answer: the status; the body byte for byte, or for a
 * create the same fields in the same order with a new id, and a Location naming it; the same set
 * of header names, with the same values but for those that differ per answer; an X-Request-Id
 * made as the service makes it.
 */
function checkSameAnswer(name: string, request: Request, ours: Answer, theirs: Answer): void {
  const fail = (what: string) => {
    throw new Error(`${name}, ${request.method} ${request.path}: ${what} differs from ours`)
  }
  if (theirs.status !== ours.status) fail(`the status (${theirs.status}, ours ${ours.status})`)
  const creates = request.method === 'POST'
  if (creates) {
    const [a, b] = [JSON.parse(ours.body), JSON.parse(theirs.body)]
    if (JSON.stringify({ ...a, id: 0 }) !== JSON.stringify({ ...b, id: 0 })) fail('the body')
    if (theirs.headers.get('location') !== `/v1/pets/${b.id}`) fail('the Location')
  } else if (theirs.body !== ours.body) fail('the body')
  const names = (answer: Answer) => [...answer.headers.keys()].sort().join(', ')
  if (names(theirs) !== names(ours)) fail(`the header set (${names(theirs)}; ours ${names(ours)})`)
  const varying = creates ? PER_CREATE : PER_ANSWER
  for (const [header, value] of ours.headers) {
    if (!varying.has(header) && theirs.headers.get(header) !== value) fail(`the ${header} header`)
  }
  if (!UUID.test(theirs.headers.get('x-request-id') ?? '')) fail('the X-Request-Id')
}

// --- what the harness reads of processes, from /proc ---------------------------------------------
/** Samples a process's resident set size (VmRSS) every 100 ms; `stop` returns the peak in MB. */
function sampleRss(pid: number): { stop(): number } {
  let peakKb = 0
  const read = () => {
    try {
      const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1])
      if (kb > peakKb) peakKb = kb
    } catch {}
  }
  read()
  const timer = setInterval(read, 100)
  return {
    stop() {
      clearInterval(timer)
      read()
      return peakKb / 1024
    },
  }
}

/** CPU time (user + system) a process has used so far, in seconds (Linux clock ticks: 1/100 s). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // Fields after the command name, which is in parentheses and may contain spaces.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

/**
 * Busy time (user, nice, system, irq, softirq), stolen time and all time (with idle and iowait)
 * of the machine (`cpu`) or one core (`cpu1`), in clock ticks.
 */
export function cpuTicks(cpu: string): { busy: number; steal: number; total: number } {
  const line = new RegExp(`^${cpu}\\s+(.+)$`, 'm').exec(readFileSync('/proc/stat', 'utf8'))?.[1]
  const ticks = (line ?? '').split(/\s+/).map(Number)
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0] = ticks
  const steal = ticks[7] ?? 0
  const busy = user + nice + system + irq + softirq
  return { busy, steal, total: busy + steal + idle + iowait }
}

// --- one measured run: wrk -----------------------------------------------------------------------
/** Keys must stay new across runs on the same database, or later runs would measure replays. */
let keyedRuns = 0

export interface RunFigures {
  /** Completed requests per second. */
  rps: number
  /** Latency percentiles in milliseconds. */
  p50: number
  p99: number
  /** Peak resident set size of the server during the run, MB. */
  rssMb: number
  /** Server CPU time (user + system) per request, µs: unlike req/s, unmoved by stolen time. */
  cpuUsPerRequest: number
  /**
   * Share (0–1) of the load generator's core that was busy during the run, whoever used it;
   * NaN without pinning. Well below 1, the load generator was not what limited req/s.
   */
  loadCoreBusy: number
}

/** wrk's path (on PATH, or Debian's /usr/bin/wrk); stops the run with one line when absent. */
export function requireWrk(): string {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/bin']
  const wrk = dirs.map((dir) => join(dir, 'wrk')).find((path) => path !== 'wrk' && existsSync(path))
  if (wrk !== undefined) return wrk
  process.stderr.write('npm run bench needs wrk, the C HTTP load generator: apt-get install wrk\n')
  process.exit(1)
}

/** wrk's version as `wrk -v` gives it (e.g. debian/4.1.0-3+b2); -v exits 1 after printing. */
export function wrkVersion(): string {
  const { stdout } = spawnSync(requireWrk(), ['-v'], { encoding: 'utf8' })
  return /^wrk (\S+)/.exec(stdout)?.[1] ?? 'unknown'
}

export type Load = { server: ServerProcess; key: string; request: Request; connections: number }

/** wrk, one thread pinned to the load core, its request and summary from wrk.lua. */
export async function runWrk({ server, key, request, connections }: Load, seconds: number) {
  const headers = [`authorization: Bearer ${key}`]
  if (request.method === 'POST') headers.push('content-type: application/json')
  const keyPrefix = request.idempotencyKey
    ? `bench-${process.pid}-${Date.now()}-${++keyedRuns}`
    : ''
  const args = [
    ...['-t1', `-c${connections}`, `-d${Math.max(1, Math.round(seconds))}s`], // whole seconds
    ...['--latency', '--timeout', '10s', '-s', fileURLToPath(new URL('wrk.lua', import.meta.url))],
    ...headers.flatMap((header) => ['-H', header]),
    ...[server.url + request.path, '--', request.method, request.body ?? '', keyPrefix],
  ]
  const wrk = requireWrk()
  const [file, ...rest] = pinning ? [TASKSET, '-c', pinning.load, wrk, ...args] : [wrk, ...args]
  let output = ''
  try {
    const { stdout, stderr } = await promisify(execFile)(file as string, rest)
    output = stdout + stderr
  } catch (err) {
    const { stdout = '', stderr = '' } = err as { stdout?: string; stderr?: string }
    throw new Error(`wrk ${args.join(' ')} failed:\n${stdout}${stderr}`)
  }
  const line = /^wrk-summary (.+)$/m.exec(output)?.[1]
  if (line === undefined) throw new Error(`wrk ${args.join(' ')} gave no summary:\n${output}`)
  // What wrk.lua's done() prints; latencies in µs.
  return JSON.parse(line) as Record<
    WrkFigure | `${'connect' | 'read' | 'write' | 'status'}Errors`,
    number
  >
}

type WrkFigure = 'requests' | 'durationUs' | 'timeouts' | 'non2xx' | 'p50Us' | 'p99Us'

/**
 * One run of wrk against one server, keep-alive connections, one request in flight each; the
 * server's peak RSS and CPU time, and how busy the load core was, read meanwhile. Any answer
 * other than 2xx, or any error, voids the run.
 */
async function measure(load: Load, seconds: number): Promise<RunFigures> {
  const { pid, url } = load.server
  const rss = sampleRss(pid)
  const cpuBefore = cpuSeconds(pid)
  const core = pinning ? `cpu${pinning.load}` : undefined
  const coreBefore = core && cpuTicks(core)
  const summary = await runWrk(load, seconds)
  const coreAfter = core && cpuTicks(core)
  const rssMb = rss.stop()
  const cpu = cpuSeconds(pid) - cpuBefore
  const { requests, connectErrors, readErrors, writeErrors, timeouts, non2xx } = summary
  if (connectErrors + readErrors + writeErrors + summary.statusErrors + timeouts + non2xx > 0) {
    throw new Error(
      `${load.request.method} ${url}${load.request.path}: ${requests} answers, ${non2xx} not 2xx, errors: ${connectErrors} connect, ${readErrors} read, ${writeErrors} write, ${timeouts} timeouts; the figures would mean nothing`,
    )
  }
  if (requests === 0) throw new Error(`${url}${load.request.path}: no answer`)
  const busy = (t: ReturnType<typeof cpuTicks>) => t.busy + t.steal
  return {
    rps: requests / (summary.durationUs / 1e6),
    p50: summary.p50Us / 1000,
    p99: summary.p99Us / 1000,
    rssMb,
    cpuUsPerRequest: (cpu * 1e6) / requests,
    loadCoreBusy:
      coreBefore && coreAfter
        ? (busy(coreAfter) - busy(coreBefore)) / (coreAfter.total - coreBefore.total)
        : Number.NaN,
  }
}

// --- alternating rounds --------------------------------------------------------------------------
export type RoundSettings = { rounds: number; seconds: number; warmupSeconds: number; key: string }

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

/** The p-th percentile (0–100) of `values`, nearest rank; NaN when there are none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = Float64Array.from(values).sort()
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[index] as number
}

/** Ratios of one server's figures to another's (the load core's share has none). */
export type Ratios = Omit<RunFigures, 'loadCoreBusy'>
const FIGURES = ['rps', 'p50', 'p99', 'rssMb', 'cpuUsPerRequest'] as const

export function medianFigures(runs: RunFigures[]): RunFigures {
  const of = (name: keyof RunFigures) => median(runs.map((run) => run[name]))
  return { ...eachFigure(of), loadCoreBusy: of('loadCoreBusy') }
}

/** Each figure (but the load core's share), computed by `of`. */
function eachFigure(of: (name: keyof Ratios) => number): Ratios {
  return Object.fromEntries(FIGURES.map((name) => [name, of(name)])) as Record<keyof Ratios, number>
}

/** Medians of the per-round ratios a ÷ b. */
export function medianRatios<R extends string>(rounds: Record<R, RunFigures>[], a: R, b: R) {
  return eachFigure((name) => median(rounds.map((round) => round[a][name] / round[b][name])))
}

/**
 * Rounds of the given servers under the same load, each run once per round after a warm-up. The
 * order rotates by one place each round, so that every server runs in every position in turn
 * (with two: AB, BA, AB, …) and drift hits all of them alike. `subject` is the server the
 * round's log line compares the others to.
 */
export async function alternate<R extends string>(
  settings: RoundSettings,
  { id, request }: Operation,
  connections: number,
  servers: readonly (readonly [R, ServerProcess])[],
  subject: R,
): Promise<Record<R, RunFigures>[]> {
  const load = (server: ServerProcess) => ({ server, key: settings.key, request, connections })
  if (settings.warmupSeconds > 0) {
    for (const [, server] of servers) await measure(load(server), settings.warmupSeconds)
  }
  const rounds: Record<R, RunFigures>[] = []
  for (let i = 0; i < settings.rounds; i++) {
    const shift = i % servers.length
    const round: Partial<Record<R, RunFigures>> = {}
    for (const [role, server] of [...servers.slice(shift), ...servers.slice(0, shift)]) {
      round[role] = await measure(load(server), settings.seconds)
    }
    rounds.push(round as Record<R, RunFigures>)
    log(`  ${id} c=${connections} round ${i + 1}: ${roundLine(round, servers, subject)}`)
  }
  return rounds
}

/** "service 9,000 req/s p99 5.1 ms, same bytes 11,000 req/s (0.82×) …, load core ≤ 70%" */
function roundLine<R extends string>(
  round: Partial<Record<R, RunFigures>>,
  servers: readonly (readonly [R, ServerProcess])[],
  subject: R,
): string {
  const figures = (role: R) => round[role] as RunFigures
  const ours = figures(subject)
  const parts = servers.map(([role, server]) => {
    const f = figures(role)
    const versus = role === subject ? '' : ` (${(ours.rps / f.rps).toFixed(2)}×)`
    return `${server.name} ${Math.round(f.rps)} req/s${versus} p99 ${f.p99.toFixed(2)} ms`
  })
  const busiest = Math.max(...servers.map(([role]) => figures(role).loadCoreBusy))
  const load = Number.isNaN(busiest) ? '' : `, load core ≤ ${Math.round(busiest * 100)}%`
  return `${parts.join(', ')}, RSS ${ours.rssMb.toFixed(0)} MB${load}`
}

/** Two servers in alternating rounds: medians, and medians of the per-round ratios. */
export interface PairResult {
  scenario: string
  label: string
  connections: number
  rounds: { service: RunFigures; baseline: RunFigures }[]
  service: RunFigures
  baseline: RunFigures
  /** Medians of the per-round ratios service ÷ baseline. */
  ratio: Ratios
}

/** Rounds of a server against a baseline, on one operation at one connection count. */
export async function pair(
  settings: RoundSettings,
  operation: Operation,
  connections: number,
  service: ServerProcess,
  baseline: ServerProcess,
): Promise<PairResult> {
  const servers = [['baseline', baseline] as const, ['service', service] as const]
  const rounds = await alternate(settings, operation, connections, servers, 'service')
  return {
    scenario: operation.id,
    label: operation.label,
    connections,
    rounds,
    service: medianFigures(rounds.map((r) => r.service)),
    baseline: medianFigures(rounds.map((r) => r.baseline)),
    ratio: medianRatios(rounds, 'service', 'baseline'),
  }
}

// --- reports -------------------------------------------------------------------------------------
export const int = (n: number) => Math.round(n).toLocaleString('en')
export const ms = (n: number) => n.toFixed(2)

/** A target of a run's report: what, the goal, what was measured, whether it was met. */
export type Target = [what: string, goal: string, measured: string, met: boolean]

/** The targets' table closing a report (none without targets), headed by `title`. */
export function targetsTable(title: string, goals: Target[]): string[] {
  if (goals.length === 0) return []
  const rows = goals.map(([what, goal, measured, met]) =>
    [what, goal, measured, met ? 'yes' : '**no**'].join(' | '),
  )
  return [
    '',
    `${title}:`,
    '',
    '| Target | Goal | Measured | Met |',
    '|---|---|---|---|',
    ...rows.map((r) => `| ${r} |`),
  ]
}
export const times = (n: number) => `${n.toFixed(2)}×`

/**
 * Writes a run's report: its figures as `<outBase><suffix>.json` (the section's name after
 * `bench`), and its Markdown as the section `name` of `<outBase>.md`, then prints the Markdown.
 */
export function writeReport(
  outBase: string,
  name: string,
  report: { durationSeconds: number },
  markdown: string,
): void {
  mkdirSync(dirname(outBase), { recursive: true })
  const json = `${outBase}${name.slice('bench'.length)}.json`
  writeFileSync(json, `${JSON.stringify(report, null, 2)}\n`)
  writeSection(`${outBase}.md`, name, markdown)
  log(`\n${markdown}\nwrote ${outBase}.md (${name}) and ${json} in ${report.durationSeconds} s`)
}

/**
 * Writes one generated section of a Markdown file between its markers, leaving the rest of the
 * file (hand-written text, other runs' sections) as it is. Each run owns its own markers, so the
 * PostgreSQL run never rewrites the SQLite figures, nor the other way round.
 */
function writeSection(path: string, name: string, markdown: string): void {
  const existing = existsSync(path) ? readFileSync(path, 'utf8') : undefined
  const begin = `<!-- ${name}:begin (generated by npm run bench; do not edit by hand) -->`
  const end = `<!-- ${name}:end -->`
  const generated = `${begin}\n${markdown}\n${end}`
  const start = existing?.indexOf(begin) ?? -1
  const stop = existing?.indexOf(end) ?? -1
  writeFileSync(
    path,
    existing === undefined
      ? `# Benchmarks\n\n${generated}\n`
      : start >= 0 && stop > start
        ? existing.slice(0, start) + generated + existing.slice(stop + end.length)
        : `${existing.trimEnd()}\n\n${generated}\n`,
  )
}
