// Alternating rounds of one server against a baseline, and their medians: shared by the SQLite
// run (service against the ceiling, and on reads the database limit too) and the PostgreSQL run
// (through PgBouncer against direct).
import { measure, type Request, type RunFigures, warmUp } from './load.ts'
import type { ServerProcess } from './processes.ts'
import type { PairResult, Ratios, Round } from './report.ts'

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
    loadCoreBusy: median(runs.map((r) => r.loadCoreBusy)),
  }
}

/** Medians of the per-round ratios service ÷ the reference `of` picks from the round. */
function medianRatios(rounds: Round[], of: (round: Round) => RunFigures): Ratios {
  const ratio = (pick: (f: RunFigures) => number) =>
    median(rounds.map((r) => pick(r.service) / pick(of(r))))
  return {
    rps: ratio((f) => f.rps),
    p50: ratio((f) => f.p50),
    p99: ratio((f) => f.p99),
    rssMb: ratio((f) => f.rssMb),
    cpuUsPerRequest: ratio((f) => f.cpuUsPerRequest),
  }
}

/**
 * Rounds of service against a baseline (the ceiling, or the service on another table) and, when
 * given, a second reference (the database limit) measured in the same rounds.
 */
export async function pair(
  settings: RoundSettings & { key: string; log: (line: string) => void },
  label: string,
  request: Request,
  connections: number,
  service: ServerProcess,
  baseline: ServerProcess,
  dbLimit?: ServerProcess,
): Promise<Omit<PairResult, 'scenario' | 'label'>> {
  const { key, log } = settings
  const run = (server: ServerProcess, seconds: number) =>
    measure({ url: server.url, pid: server.pid, key, request, connections, seconds })
  await warmUp(
    { url: baseline.url, pid: baseline.pid, key, request, connections },
    settings.warmupSeconds,
  )
  if (dbLimit !== undefined) {
    await warmUp(
      { url: dbLimit.url, pid: dbLimit.pid, key, request, connections },
      settings.warmupSeconds,
    )
  }
  await warmUp(
    { url: service.url, pid: service.pid, key, request, connections },
    settings.warmupSeconds,
  )
  const rounds: Round[] = []
  for (let i = 0; i < settings.rounds; i++) {
    // ABBA: the order flips each round, so the service runs first and last in turn and neither
    // reference always runs before it. The database limit, when measured, runs in the middle.
    const order: [keyof Round, ServerProcess | undefined][] = [
      ['baseline', baseline],
      ['dbLimit', dbLimit],
      ['service', service],
    ]
    if (i % 2 === 1) order.reverse()
    const figures: Partial<Round> = {}
    for (const [role, server] of order) {
      if (server !== undefined) figures[role] = await run(server, settings.seconds)
    }
    const { service: serviceRun, baseline: baselineRun } = figures as Round
    rounds.push(figures as Round)
    const versus = (server: ServerProcess, figure: RunFigures) =>
      `${server.name} ${Math.round(figure.rps)} req/s (${(serviceRun.rps / figure.rps).toFixed(2)}×)`
    const references = [versus(baseline, baselineRun)]
    if (dbLimit !== undefined && figures.dbLimit !== undefined) {
      references.push(versus(dbLimit, figures.dbLimit))
    }
    log(
      `  ${label} c=${connections} round ${i + 1}: ${service.name} ${Math.round(serviceRun.rps)} req/s, ${references.join(', ')}, p99 ${serviceRun.p99.toFixed(2)} ms, RSS ${serviceRun.rssMb.toFixed(0)} MB`,
    )
  }
  const result: Omit<PairResult, 'scenario' | 'label'> = {
    connections,
    rounds,
    service: medianFigures(rounds.map((r) => r.service)),
    baseline: medianFigures(rounds.map((r) => r.baseline)),
    ratio: medianRatios(rounds, (r) => r.baseline),
  }
  if (dbLimit !== undefined) {
    result.dbLimit = medianFigures(rounds.map((r) => r.dbLimit as RunFigures))
    result.dbLimitRatio = medianRatios(rounds, (r) => r.dbLimit as RunFigures)
  }
  return result
}
