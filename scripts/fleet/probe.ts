// What an orchestrator's probe does: a GET on a fresh connection (no keep-alive, as kubelet's
// probes are), with a timeout; the status and how long it took. The fleet harness and the
// benchmark's prober (scripts/bench/probe.ts) both send theirs here.
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
