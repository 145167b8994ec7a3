// One measured run: autocannon (as a library) against one server, keep-alive connections, with
// latencies taken from every response (autocannon's own histogram rounds to whole milliseconds)
// and the server's resident memory sampled meanwhile.
import autocannon from 'autocannon'
import { cpuSeconds, sampleRss } from './processes.ts'

export interface Request {
  method: 'GET' | 'POST'
  path: string
  body?: string
  /** D14: a new Idempotency-Key on every request (never a replay). */
  idempotencyKey?: boolean
  /** Further request headers (e.g. Accept-Encoding, D17). */
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
}

const AUTH_HEADERS = (key: string, request: Request): Record<string, string> =>
  request.method === 'POST'
    ? { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
    : { authorization: `Bearer ${key}` }

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)
  return sorted[Math.max(0, index)] as number
}

export async function measure(options: {
  url: string
  pid: number
  key: string
  request: Request
  connections: number
  seconds: number
}): Promise<RunFigures> {
  const { url, pid, key, request, connections, seconds } = options
  let latencies = new Float64Array(1 << 16)
  let count = 0
  const rss = sampleRss(pid)
  const cpuBefore = cpuSeconds(pid)
  let finished: (result: autocannon.Result) => void = () => {}
  let failed: (err: unknown) => void = () => {}
  const done = new Promise<autocannon.Result>((resolve, reject) => {
    finished = resolve
    failed = reject
  })
  const keyPrefix = `bench-${process.pid}-${Date.now()}-${++keyedRuns}`
  let keysSent = 0
  const cannon: autocannon.Options = {
    ...(request.idempotencyKey
      ? {
          requests: [
            {
              setupRequest: (req: autocannon.Request) => ({
                ...req,
                headers: { ...req.headers, 'idempotency-key': `${keyPrefix}-${++keysSent}` },
              }),
            },
          ],
        }
      : {}),
    url: url + request.path,
    method: request.method,
    headers: { ...AUTH_HEADERS(key, request), ...request.headers },
    ...(request.body === undefined ? {} : { body: request.body }),
    connections,
    pipelining: 1,
    duration: seconds,
    timeout: 10,
  }
  const instance = autocannon(cannon, (err, result) => (err ? failed(err) : finished(result)))
  instance.on('response', (_client, _status, _bytes, responseTime) => {
    if (count === latencies.length) {
      const bigger = new Float64Array(latencies.length * 2)
      bigger.set(latencies)
      latencies = bigger
    }
    latencies[count++] = responseTime
  })
  const result = await done
  const rssMb = rss.stop()
  const cpu = cpuSeconds(pid) - cpuBefore
  if (result.errors > 0 || result.timeouts > 0 || result.non2xx > 0) {
    throw new Error(
      `${request.method} ${url}${request.path}: ${result.errors} errors, ${result.timeouts} timeouts, ${result.non2xx} non-2xx responses (by status: ${JSON.stringify(result.statusCodeStats)}); the figures would mean nothing`,
    )
  }
  const sorted = latencies.subarray(0, count).sort()
  return {
    rps: result.requests.total / result.duration,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    rssMb,
    cpuUsPerRequest: (cpu * 1e6) / result.requests.total,
  }
}

/** A short unmeasured run, so both servers are warm (JIT, caches) before the rounds. */
export async function warmUp(options: Omit<Parameters<typeof measure>[0], 'seconds'>, s: number) {
  if (s > 0) await measure({ ...options, seconds: s })
}
