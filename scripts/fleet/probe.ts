// What an orchestrator's probe does: a GET on a fresh connection (no keep-alive, as kubelet's
// probes are), with a timeout; the status and how long it took.
import { request } from 'node:http'

export interface ProbeResult {
  /** Undefined when no answer came (refused, reset, timed out). */
  status: number | undefined
  ms: number
}

export function probe(url: string, timeoutMs: number): Promise<ProbeResult> {
  const started = performance.now()
  return new Promise((resolve) => {
    const done = (status: number | undefined) =>
      resolve({ status, ms: performance.now() - started })
    const req = request(url, { agent: false, timeout: timeoutMs }, (res) => {
      res.resume()
      res.once('end', () => done(res.statusCode))
      res.once('error', () => done(undefined))
    })
    req.once('timeout', () => req.destroy(new Error('timed out')))
    req.once('error', () => done(undefined))
    req.end()
  })
}

/** The p-th percentile (0–100) of `values`, nearest-rank; NaN when there are none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const rank = Math.ceil((p / 100) * sorted.length)
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] as number
}
