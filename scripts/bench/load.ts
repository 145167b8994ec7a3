// One measured run: wrk (C, one thread, pinned to the load core) against one server, keep-alive
// connections, one request in flight each, with its request and summary from wrk.lua; the
// server's resident memory and CPU time, and how busy the load core was, read meanwhile.
//
// wrk and not a Node.js load generator, so that the load generator is never in question: it is
// what an outside measurement uses, and it has room to spare. Against the ceiling (a raw
// node:http server answering precomputed bytes, the fastest server here) autocannon kept its core
// 86–94% busy, wrk 70–73%; both saturated the server's core (95–99%) and measured the same req/s
// within the noise (docs/benchmarks.md, "Load"). Each run records the load core's busy share, so
// a report shows that the load generator was not the limit.
import { execFile, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { delimiter, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { coreTicks, cpuSeconds, pinning, sampleRss, TASKSET } from './processes.ts'

const execFileAsync = promisify(execFile)

export interface Request {
  method: 'GET' | 'POST'
  path: string
  body?: string
  /** D14: a new Idempotency-Key on every request (never a replay). */
  idempotencyKey?: boolean
  /** Further request headers (e.g. Accept-Encoding, D26). */
  headers?: Record<string, string>
}

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

const WRK_SCRIPT = fileURLToPath(new URL('./wrk.lua', import.meta.url))
const INSTALL_LINE = 'npm run bench needs wrk, the C HTTP load generator: apt-get install wrk'

/** wrk's path: on PATH, or Debian's /usr/bin/wrk; undefined when it is not installed. */
export function wrkBinary(): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/bin']
  return dirs.map((dir) => join(dir, 'wrk')).find((path) => path !== 'wrk' && existsSync(path))
}

/** Stops the run with one line saying how to install wrk, when it is absent. */
export function requireWrk(): string {
  const wrk = wrkBinary()
  if (wrk === undefined) {
    process.stderr.write(`${INSTALL_LINE}\n`)
    process.exit(1)
  }
  return wrk
}

/** wrk's version as `wrk -v` gives it (e.g. debian/4.1.0-3+b2); -v exits 1 after printing. */
export function wrkVersion(): string {
  const { stdout } = spawnSync(requireWrk(), ['-v'], { encoding: 'utf8' })
  return /^wrk (\S+)/.exec(stdout)?.[1] ?? 'unknown'
}

/** What wrk.lua's done() prints. */
interface WrkSummary {
  requests: number
  durationUs: number
  connectErrors: number
  readErrors: number
  writeErrors: number
  statusErrors: number
  timeouts: number
  non2xx: number
  p50Us: number
  p99Us: number
  maxUs: number
}

function wrkArguments(options: {
  url: string
  key: string
  request: Request
  connections: number
  seconds: number
}): string[] {
  const { url, key, request, connections, seconds } = options
  const headers: Record<string, string> = {
    authorization: `Bearer ${key}`,
    ...(request.method === 'POST' ? { 'content-type': 'application/json' } : {}),
    ...request.headers,
  }
  const keyPrefix = request.idempotencyKey
    ? `bench-${process.pid}-${Date.now()}-${++keyedRuns}`
    : ''
  return [
    '-t1',
    `-c${connections}`,
    // wrk takes whole seconds.
    `-d${Math.max(1, Math.round(seconds))}s`,
    '--latency',
    '--timeout',
    '10s',
    '-s',
    WRK_SCRIPT,
    ...Object.entries(headers).flatMap(([name, value]) => ['-H', `${name}: ${value}`]),
    url + request.path,
    '--',
    request.method,
    request.body ?? '',
    keyPrefix,
  ]
}

/** Runs wrk pinned to the load core; its summary, or an error with what it printed. */
async function runWrk(args: string[]): Promise<WrkSummary> {
  const wrk = requireWrk()
  const [file, ...rest] = pinning ? [TASKSET, '-c', pinning.load, wrk, ...args] : [wrk, ...args]
  let stdout = ''
  let stderr = ''
  try {
    ;({ stdout, stderr } = await execFileAsync(file as string, rest))
  } catch (err) {
    const { stdout: out = '', stderr: errors = '' } = err as { stdout?: string; stderr?: string }
    throw new Error(`wrk ${args.join(' ')} failed:\n${out}${errors}`)
  }
  const line = /^wrk-summary (.+)$/m.exec(stdout)?.[1]
  if (line === undefined)
    throw new Error(`wrk ${args.join(' ')} gave no summary:\n${stdout}${stderr}`)
  return JSON.parse(line) as WrkSummary
}

export async function measure(options: {
  url: string
  pid: number
  key: string
  request: Request
  connections: number
  seconds: number
}): Promise<RunFigures> {
  const { url, pid, request } = options
  const rss = sampleRss(pid)
  const cpuBefore = cpuSeconds(pid)
  const coreBefore = pinning ? coreTicks(pinning.load) : undefined
  const summary = await runWrk(wrkArguments(options))
  const coreAfter = pinning ? coreTicks(pinning.load) : undefined
  const rssMb = rss.stop()
  const cpu = cpuSeconds(pid) - cpuBefore
  const failures =
    summary.connectErrors +
    summary.readErrors +
    summary.writeErrors +
    summary.statusErrors +
    summary.timeouts +
    summary.non2xx
  if (failures > 0 || summary.requests === 0) {
    throw new Error(
      `${request.method} ${url}${request.path}: ${summary.requests} answers, ${summary.non2xx} not 2xx, errors: ${summary.connectErrors} connect, ${summary.readErrors} read, ${summary.writeErrors} write, ${summary.timeouts} timeouts; the figures would mean nothing`,
    )
  }
  const loadCoreBusy =
    coreBefore && coreAfter
      ? (coreAfter.busy - coreBefore.busy) / (coreAfter.total - coreBefore.total)
      : Number.NaN
  return {
    rps: summary.requests / (summary.durationUs / 1e6),
    p50: summary.p50Us / 1000,
    p99: summary.p99Us / 1000,
    rssMb,
    cpuUsPerRequest: (cpu * 1e6) / summary.requests,
    loadCoreBusy,
  }
}

/** A short unmeasured run, so both servers are warm (JIT, caches) before the rounds. */
export async function warmUp(options: Omit<Parameters<typeof measure>[0], 'seconds'>, s: number) {
  if (s > 0) await measure({ ...options, seconds: s })
}

/**
 * The operations the side-by-side scripts (ab.ts, tracing.ts) measure, by the names their
 * --only takes; getPet reads the pet in the middle of a seed of `pets`.
 */
export function sideBySideRequests(pets: number): Record<string, Request> {
  const body = JSON.stringify({ name: 'Benchmark Bella', categoryId: 42, status: 'available' })
  return {
    list20: { method: 'GET', path: '/v1/pets?limit=20' },
    list100: { method: 'GET', path: '/v1/pets?limit=100' },
    status: { method: 'GET', path: '/v1/pets?limit=20&status=available' },
    get: { method: 'GET', path: `/v1/pets/${pets / 2}` },
    create: { method: 'POST', path: '/v1/pets', body },
    createKeyed: { method: 'POST', path: '/v1/pets', body, idempotencyKey: true },
  }
}

/**
 * The environment of a service the side-by-side scripts run: a copy of the seeded SQLite file
 * named `copy` (or `database`, a seeded PostgreSQL, with the PostgreSQL run's pool size), no
 * rate limit, warn-level logs, metrics on. Load shedding stays on (its hook runs for every
 * request, as shipped), with a threshold that a busy shared machine does not reach: a shed
 * request would void the round.
 */
export function sideBySideEnv(options: {
  key: string
  database: { sqliteCopy: string } | { url: string; poolSize: number }
}): Record<string, string> {
  const { database } = options
  return {
    ...('url' in database
      ? { DATABASE_URL: database.url, DATABASE_POOL_SIZE: String(database.poolSize) }
      : { DATABASE_URL: `sqlite:${database.sqliteCopy}` }),
    LOG_LEVEL: 'warn',
    METRICS_PORT: '0',
    PETSTORE_RATE_LIMIT: '0',
    PETSTORE_API_KEYS: options.key,
    PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '5000',
  }
}
