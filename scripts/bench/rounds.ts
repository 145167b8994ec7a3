// Alternating rounds of one server against a baseline, and their medians: shared by the SQLite
// run (service against the ceiling) and the PostgreSQL run (through PgBouncer against direct).
import { measure, type Request, type RunFigures, warmUp } from './load.ts'
import type { ServerProcess } from './processes.ts'
import type { PairResult, Round } from './report.ts'

export interface RoundSettings {
  rounds: number
  seconds: number
  warmupSeconds: number
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

function medianFigures(runs: RunFigures[]): RunFigures {
  return {
    rps: median(runs.map((r) => r.rps)),
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    rssMb: median(runs.map((r) => r.rssMb)),
    cpuUsPerRequest: median(runs.map((r) => r.cpuUsPerRequest)),
  }
}

function medianRatios(rounds: Round[]): RunFigures {
  const ratio = (pick: (f: RunFigures) => number) =>
    median(rounds.map((r) => pick(r.service) / pick(r.baseline)))
  return {
    rps: ratio((f) => f.rps),
    p50: ratio((f) => f.p50),
    p99: ratio((f) => f.p99),
    rssMb: ratio((f) => f.rssMb),
    cpuUsPerRequest: ratio((f) => f.cpuUsPerRequest),
  }
}

/** Rounds of service against a baseline (the ceiling, or the service on another table). */
export async function pair(
  settings: RoundSettings & { key: string; log: (line: string) => void },
  label: string,
  request: Request,
  connections: number,
  service: ServerProcess,
  baseline: ServerProcess,
): Promise<Omit<PairResult, 'scenario' | 'label'>> {
  const { key, log } = settings
  const run = (server: ServerProcess, seconds: number) =>
    measure({ url: server.url, pid: server.pid, key, request, connections, seconds })
  await warmUp(
    { url: baseline.url, pid: baseline.pid, key, request, connections },
    settings.warmupSeconds,
  )
  await warmUp(
    { url: service.url, pid: service.pid, key, request, connections },
    settings.warmupSeconds,
  )
  const rounds: Round[] = []
  for (let i = 0; i < settings.rounds; i++) {
    // ABBA: the order flips each round, so neither side always runs second.
    let baselineRun: RunFigures
    let serviceRun: RunFigures
    if (i % 2 === 0) {
      baselineRun = await run(baseline, settings.seconds)
      serviceRun = await run(service, settings.seconds)
    } else {
      serviceRun = await run(service, settings.seconds)
      baselineRun = await run(baseline, settings.seconds)
    }
    rounds.push({ service: serviceRun, baseline: baselineRun })
    log(
      `  ${label} c=${connections} round ${i + 1}: ${baseline.name} ${Math.round(baselineRun.rps)} req/s, ${service.name} ${Math.round(serviceRun.rps)} req/s (${(serviceRun.rps / baselineRun.rps).toFixed(2)}×), p99 ${serviceRun.p99.toFixed(2)} ms, RSS ${serviceRun.rssMb.toFixed(0)} MB`,
    )
  }
  return {
    connections,
    rounds,
    service: medianFigures(rounds.map((r) => r.service)),
    baseline: medianFigures(rounds.map((r) => r.baseline)),
    ratio: medianRatios(rounds),
  }
}
