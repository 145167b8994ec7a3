// Alternating rounds of several servers under the same load, and their medians: the SQLite run
// (the service beside its references), and pairs (the PostgreSQL run through PgBouncer against
// direct, the table sizes, the app without its database against the ceiling, ab.ts).
import { measure, type Request, type RunFigures, warmUp } from './load.ts'
import type { ServerProcess } from './processes.ts'
import type { Comparison, ComparisonRatios, PairResult, Ratios, Role, RoleRound } from './report.ts'

export interface RoundSettings {
  rounds: number
  seconds: number
  warmupSeconds: number
}

type Settings = RoundSettings & { key: string; log: (line: string) => void }

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

/** Medians of the per-round ratios a ÷ b, over the rounds that measured both. */
function medianRatios<R extends string>(
  rounds: Partial<Record<R, RunFigures>>[],
  a: R,
  b: R,
): Ratios | undefined {
  const both = rounds.filter((r) => r[a] !== undefined && r[b] !== undefined)
  if (both.length === 0) return undefined
  const ratio = (pick: (f: RunFigures) => number) =>
    median(both.map((r) => pick(r[a] as RunFigures) / pick(r[b] as RunFigures)))
  return {
    rps: ratio((f) => f.rps),
    p50: ratio((f) => f.p50),
    p99: ratio((f) => f.p99),
    rssMb: ratio((f) => f.rssMb),
    cpuUsPerRequest: ratio((f) => f.cpuUsPerRequest),
  }
}

/**
 * Rounds of the given servers, each run once per round. The order rotates by one place each
 * round, so that every server runs in every position in turn (with two: AB, BA, AB, …) and drift
 * hits all of them alike. `subject` is the server the round's log line compares the others to.
 */
async function alternate<R extends string>(
  settings: Settings,
  label: string,
  request: Request,
  connections: number,
  servers: readonly (readonly [R, ServerProcess])[],
  subject: R,
): Promise<Record<R, RunFigures>[]> {
  const { key, log } = settings
  const options = (server: ServerProcess) => ({
    url: server.url,
    pid: server.pid,
    key,
    request,
    connections,
  })
  for (const [, server] of servers) await warmUp(options(server), settings.warmupSeconds)
  const rounds: Record<R, RunFigures>[] = []
  for (let i = 0; i < settings.rounds; i++) {
    const shift = i % servers.length
    const order = [...servers.slice(shift), ...servers.slice(0, shift)]
    const figures: Partial<Record<R, RunFigures>> = {}
    for (const [role, server] of order) {
      figures[role] = await measure({ ...options(server), seconds: settings.seconds })
    }
    const round = figures as Record<R, RunFigures>
    rounds.push(round)
    log(`  ${label} c=${connections} round ${i + 1}: ${roundLine(round, servers, subject)}`)
  }
  return rounds
}

/** "service 9,000 req/s p99 5.1 ms, ceiling 50,000 req/s (0.18×), …, load core ≤ 70%" */
function roundLine<R extends string>(
  round: Record<R, RunFigures>,
  servers: readonly (readonly [R, ServerProcess])[],
  subject: R,
): string {
  const ours = round[subject]
  const parts = servers.map(([role, server]) => {
    const f = round[role]
    const versus = role === subject ? '' : ` (${(ours.rps / f.rps).toFixed(2)}×)`
    return `${server.name} ${Math.round(f.rps)} req/s${versus} p99 ${f.p99.toFixed(2)} ms`
  })
  const busiest = Math.max(...servers.map(([role]) => round[role].loadCoreBusy))
  const load = Number.isNaN(busiest) ? '' : `, load core ≤ ${Math.round(busiest * 100)}%`
  return `${parts.join(', ')}, RSS ${ours.rssMb.toFixed(0)} MB${load}`
}

/** Rounds of a server against a baseline: medians, and medians of the per-round ratios. */
export async function pair(
  settings: Settings,
  label: string,
  request: Request,
  connections: number,
  service: ServerProcess,
  baseline: ServerProcess,
): Promise<Omit<PairResult, 'scenario' | 'label'>> {
  const servers = [
    ['baseline', baseline],
    ['service', service],
  ] as const
  const rounds = await alternate(settings, label, request, connections, servers, 'service')
  return {
    connections,
    rounds,
    service: medianFigures(rounds.map((r) => r.service)),
    baseline: medianFigures(rounds.map((r) => r.baseline)),
    ratio: medianRatios(rounds, 'service', 'baseline') as Ratios,
  }
}

/**
 * Rounds of the service and each reference given, all in the same rounds: medians per server,
 * and the ratios the report shows (each the median of its per-round ratios).
 */
export async function compare(
  settings: Settings,
  label: string,
  request: Request,
  connections: number,
  servers: Partial<Record<Role, ServerProcess>> & { service: ServerProcess },
): Promise<Omit<Comparison, 'scenario' | 'label'>> {
  const present = (Object.entries(servers) as [Role, ServerProcess | undefined][]).filter(
    (entry): entry is [Role, ServerProcess] => entry[1] !== undefined,
  )
  const rounds: RoleRound[] = await alternate(
    settings,
    label,
    request,
    connections,
    present,
    'service',
  )
  const figures: RoleRound = {}
  for (const [role] of present) {
    figures[role] = medianFigures(rounds.map((r) => r[role] as RunFigures))
  }
  const ratios: ComparisonRatios = {}
  const add = (name: keyof ComparisonRatios, a: Role, b: Role) => {
    const ratio = medianRatios(rounds, a, b)
    if (ratio !== undefined) ratios[name] = ratio
  }
  add('serviceToSameBytes', 'service', 'sameBytes')
  add('serviceToFramework', 'service', 'framework')
  add('frameworkToSameBytes', 'framework', 'sameBytes')
  add('serviceToDbLimit', 'service', 'dbLimit')
  add('serviceToCeiling', 'service', 'ceiling')
  return { connections, rounds, figures, ratios }
}
