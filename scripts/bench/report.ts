// The benchmark's report: its JSON shape, the Markdown tables, and the targets it is held to.
import type { RunFigures } from './load.ts'

/** Ratios of one server's figures to another's (the load core's share has none). */
export type Ratios = Omit<RunFigures, 'loadCoreBusy'>

/**
 * The SQLite run's servers: the service and its references, the same bytes (same-bytes.ts), the
 * framework floor (fastify-floor.ts), the database limit (db-limit.ts) and the ceiling
 * (ceiling.ts).
 */
export type Role = 'service' | 'sameBytes' | 'framework' | 'dbLimit' | 'ceiling'

/** One round's figures, for each server measured in it. */
export type RoleRound = Partial<Record<Role, RunFigures>>

/** Medians of per-round ratios; each present when both of its servers were measured. */
export interface ComparisonRatios {
  /** The targets' ratio. */
  serviceToSameBytes?: Ratios
  /** What the service adds to bare Fastify. */
  serviceToFramework?: Ratios
  /** What bare Fastify adds to node:http. */
  frameworkToSameBytes?: Ratios
  serviceToDbLimit?: Ratios
  serviceToCeiling?: Ratios
}

/** One scenario at one connection count: the service and its references in the same rounds. */
export interface Comparison {
  scenario: string
  label: string
  connections: number
  rounds: RoleRound[]
  /** Medians over the rounds, for each server measured. */
  figures: RoleRound
  ratios: ComparisonRatios
}

/** Two servers in alternating rounds (table sizes, the app without its database, PostgreSQL). */
export interface PairResult {
  scenario: string
  label: string
  connections: number
  rounds: { service: RunFigures; baseline: RunFigures }[]
  /** Medians over the rounds. */
  service: RunFigures
  baseline: RunFigures
  /** Medians of the per-round ratios service ÷ baseline. */
  ratio: Ratios
}

export interface BenchReport {
  date: string
  durationSeconds: number
  machine: { cpu: string; cores: number; memoryGb: number }
  versions: { node: string; fastify: string; sqlite: string; wrk: string }
  settings: {
    mode: string
    pets: number
    smallPets: number
    rounds: number
    seconds: number
    warmupSeconds: number
    connections: number[]
    pinning: { server: string; load: string } | null
    scenarios: string[]
  }
  conditions: {
    loadAverageBefore: number[]
    loadAverageAfter: number[]
    /** Average CPU (in cores) that processes other than the benchmark's used during it. */
    otherProcessesCores: number
    /** Average CPU (in cores) the hypervisor took during it. */
    stolenCores: number
  }
  comparisons: Comparison[]
  tableSize: PairResult | null
  /** The service's app without its database (app-without-db.ts) against the ceiling. */
  appWithoutDatabase: PairResult[]
}

const int = (n: number) => Math.round(n).toLocaleString('en')
const ms = (n: number) => n.toFixed(2)
const x = (n: number) => `${n.toFixed(2)}×`
const percent = (share: number) => `${Math.round(share * 100)}%`

/** The servers in the order the tables show them. */
const ROLES: readonly Role[] = ['service', 'sameBytes', 'framework', 'dbLimit', 'ceiling']
const ROLE_NAMES: Record<Role, string> = {
  service: 'service',
  sameBytes: 'same bytes',
  framework: 'framework floor',
  dbLimit: 'database limit',
  ceiling: 'ceiling',
}

const CREATES = ['create', 'createKeyed']

interface Target {
  what: string
  goal: string
  measured: string
  met: boolean
}

/** Issue 22's ratio targets: the service against the same bytes at 50 connections. */
function ratioTarget(at50: Comparison[], ids: string[], what: string, min: number): Target[] {
  const found = at50.filter((c) => ids.includes(c.scenario))
  const ratios = found.map((c) => c.ratios.serviceToSameBytes).filter((r) => r !== undefined)
  if (ratios.length === 0) return []
  return [
    {
      what,
      goal: `≥ ${min.toFixed(2)}× same bytes`,
      measured: ratios.map((r) => x(r.rps)).join(', '),
      met: ratios.every((r) => r.rps >= min),
    },
  ]
}

/** p99 ≤ 10 ms on every operation where the same bytes' own p99 is ≤ 8 ms (issue 22). */
function p99Target(at50: Comparison[]): Target[] {
  const held = at50.filter((c) => (c.figures.sameBytes?.p99 ?? Number.POSITIVE_INFINITY) <= 8)
  if (held.length === 0) return []
  const worst = held.reduce((a, b) =>
    (a.figures.service?.p99 ?? 0) >= (b.figures.service?.p99 ?? 0) ? a : b,
  )
  const worstP99 = worst.figures.service?.p99 ?? Number.NaN
  const exempt = at50.length - held.length
  return [
    {
      what: `p99 latency, where same bytes' own p99 ≤ 8 ms (${held.length} operations${exempt > 0 ? `; ${exempt} where it was not` : ''})`,
      goal: '≤ 10 ms',
      measured: `worst ${ms(worstP99)} ms (${worst.label})`,
      met: worstP99 <= 10,
    },
  ]
}

function targets(report: BenchReport): Target[] {
  const at50 = report.comparisons.filter((c) => c.connections === 50)
  const out: Target[] = [
    ...ratioTarget(
      at50,
      ['list20', 'list100', 'status', 'deep'],
      'listPets `limit=20`, `limit=100`, status filter, deep cursor page',
      0.8,
    ),
    ...ratioTarget(at50, ['get'], 'getPet', 0.75),
    ...ratioTarget(
      at50,
      CREATES,
      "createPet, durable; with a new `Idempotency-Key` each (against same bytes' keyed create)",
      0.75,
    ),
    ...p99Target(at50),
  ]
  const rss = report.comparisons.map((c) => c.figures.service?.rssMb ?? 0)
  if (rss.length > 0) {
    const worstRss = Math.max(...rss)
    out.push({
      what: 'server RSS under load',
      goal: '≤ 150 MB',
      measured: `peak ${worstRss.toFixed(0)} MB`,
      met: worstRss <= 150,
    })
  }
  if (report.tableSize) {
    // ratio.rps = big ÷ small; "how many times slower" is its inverse.
    const slower = 1 / report.tableSize.ratio.rps
    out.push({
      what: `list on ${int(report.settings.pets)} pets vs ${int(report.settings.smallPets)}`,
      goal: '≤ 1.20× slower',
      measured: `${x(slower)} slower`,
      met: slower <= 1.2,
    })
  }
  return out
}

/** Every run's share of the load core, for the servers given (all when none). */
function loadShares(comparisons: Comparison[], roles: readonly Role[] = ROLES): number[] {
  return comparisons
    .flatMap((c) => c.rounds)
    .flatMap((round) => roles.map((role) => round[role]?.loadCoreBusy))
    .filter((share) => share !== undefined)
}

/**
 * How busy the load generator's core was: over every measured run, and over the ceiling's,
 * the fastest server and so the load generator's hardest work. Far below 100%, wrk was not
 * what limited a figure.
 */
function loadCoreSentence(report: BenchReport): string {
  const all = loadShares(report.comparisons)
  const ceiling = loadShares(report.comparisons, ['ceiling'])
  if (all.length === 0 || all.some(Number.isNaN)) return ''
  const atCeiling =
    ceiling.length > 0
      ? `, at most ${percent(Math.max(...ceiling))} while the ceiling answered`
      : ''
  return ` The load generator's core was busy ${percent(Math.min(...all))}–${percent(Math.max(...all))} of each run (whoever used it)${atCeiling}.`
}

function introduction(report: BenchReport): string[] {
  const { settings, machine, versions, conditions } = report
  const loads = (averages: number[]) => averages.map((n) => n.toFixed(2)).join(' ')
  return [
    `Run of ${report.date.slice(0, 16).replace('T', ' ')} UTC (${settings.mode}, ${report.durationSeconds} s): ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGb} GB; Node.js ${versions.node}, Fastify ${versions.fastify}, SQLite ${versions.sqlite}, wrk ${versions.wrk}.`,
    '',
    `${int(settings.pets)} pets in the SQLite file; ${settings.rounds} rounds of ${settings.seconds} s per figure after ${settings.warmupSeconds} s of warm-up for each server, the servers' order rotating from round to round; ${settings.pinning ? `servers pinned to core ${settings.pinning.server}, wrk to core ${settings.pinning.load}` : 'no pinning (taskset missing)'}. While it ran, other processes used ${conditions.otherProcessesCores.toFixed(2)} of the ${machine.cores} cores on average and the hypervisor took ${conditions.stolenCores.toFixed(2)} (load average before/after: ${loads(conditions.loadAverageBefore)} / ${loads(conditions.loadAverageAfter)}).${loadCoreSentence(report)}`,
    '',
    "Each figure is the median over the rounds; each ratio is the median of the per-round ratios (for req/s higher is better). The service and its references, measured in the same rounds on the same file: **same bytes** (raw `node:http`, the service's SQL, bodies and response headers, createPet durable with a group commit), the **framework floor** (bare Fastify doing the same), the **database limit** (raw `node:http`, the same SQL, minimal headers; reads only) and the **ceiling** (raw `node:http`, precomputed bodies). req/s, p50 and p99 are wrk's; CPU is the server process's user + system time per request and RSS its peak, both read from `/proc`. With an `Idempotency-Key`, same bytes and the floor do the service's database work for it: its fingerprint of the body, then the pet and the key's record in the same durable transaction, by the service's own statements (keyed against keyed).",
  ]
}

/** The cell for one ratio, a dash where it was not measured. */
const ratioCell = (ratio: Ratios | undefined, bold = false) =>
  ratio === undefined ? '–' : bold ? `**${x(ratio.rps)}**` : x(ratio.rps)

function throughputTable(report: BenchReport): string[] {
  const lines = [
    `| Operation | Conn. | req/s ${ROLES.map((r) => ROLE_NAMES[r]).join(' | req/s ')} | **service ÷ same bytes** | service ÷ framework floor | framework floor ÷ same bytes | service ÷ database limit | load core busy, at most |`,
    `|---|--:|${ROLES.map(() => '--:|').join('')}--:|--:|--:|--:|--:|`,
  ]
  for (const c of report.comparisons) {
    const shares = loadShares([c])
    const cells = [
      c.label,
      c.connections,
      ...ROLES.map((role) => {
        const f = c.figures[role]
        return f === undefined ? '–' : int(f.rps)
      }),
      ratioCell(c.ratios.serviceToSameBytes, true),
      ratioCell(c.ratios.serviceToFramework),
      ratioCell(c.ratios.frameworkToSameBytes),
      ratioCell(c.ratios.serviceToDbLimit),
      shares.length === 0 || shares.some(Number.isNaN) ? '–' : percent(Math.max(...shares)),
    ]
    lines.push(`| ${cells.join(' | ')} |`)
  }
  return lines
}

function detailTable(report: BenchReport): string[] {
  const lines = [
    `Latency and CPU per server, in the order ${ROLES.map((r) => ROLE_NAMES[r]).join(' / ')} (a dash where one was not measured):`,
    '',
    '| Operation | Conn. | p50 ms | p99 ms | CPU µs/req | RSS MB service |',
    '|---|--:|--:|--:|--:|--:|',
  ]
  for (const c of report.comparisons) {
    const each = (pick: (f: RunFigures) => number, format: (n: number) => string) =>
      ROLES.map((role) => {
        const f = c.figures[role]
        return f === undefined ? '–' : format(pick(f))
      }).join(' / ')
    const cells = [
      c.label,
      c.connections,
      each((f) => f.p50, ms),
      each((f) => f.p99, ms),
      each(
        (f) => f.cpuUsPerRequest,
        (n) => n.toFixed(1),
      ),
      c.figures.service ? c.figures.service.rssMb.toFixed(0) : '–',
    ]
    lines.push(`| ${cells.join(' | ')} |`)
  }
  return lines
}

function tableSizeTable(report: BenchReport): string[] {
  const t = report.tableSize
  if (!t) return []
  const { settings } = report
  return [
    '',
    `Table size: listPets \`limit=20\` at ${t.connections} connections, the same service on ${int(settings.pets)} pets and on ${int(settings.smallPets)} pets, alternating.`,
    '',
    `| Table | req/s | p50 ms | p99 ms | CPU µs/req |`,
    '|---|--:|--:|--:|--:|',
    `| ${int(settings.smallPets)} pets | ${int(t.baseline.rps)} | ${ms(t.baseline.p50)} | ${ms(t.baseline.p99)} | ${t.baseline.cpuUsPerRequest.toFixed(1)} |`,
    `| ${int(settings.pets)} pets | ${int(t.service.rps)} | ${ms(t.service.p50)} | ${ms(t.service.p99)} | ${t.service.cpuUsPerRequest.toFixed(1)} |`,
    `| ${int(settings.pets)} : ${int(settings.smallPets)} | ${x(t.ratio.rps)} the throughput (${x(1 / t.ratio.rps)} slower) | | | |`,
  ]
}

function appWithoutDatabaseTable(report: BenchReport): string[] {
  if (report.appWithoutDatabase.length === 0) return []
  const lines = [
    '',
    'Where the time goes: the same app (every plugin, hook, schema and header) with the database taken out (`scripts/bench/app-without-db.ts`: the seeded pets computed in memory, identical bodies), against the ceiling in the same way, at 50 connections.',
    '',
    '| Operation | req/s app without database | req/s ceiling | **ratio** | p99 ms app without database | CPU µs/req app without database (ceiling) | CPU µs/req service (from the table above) |',
    '|---|--:|--:|--:|--:|--:|--:|',
  ]
  for (const f of report.appWithoutDatabase) {
    const service = report.comparisons.find(
      (c) => c.scenario === f.scenario && c.connections === 50,
    )?.figures.service
    lines.push(
      `| ${f.label} | ${int(f.service.rps)} | ${int(f.baseline.rps)} | **${x(f.ratio.rps)}** | ${ms(f.service.p99)} | ${f.service.cpuUsPerRequest.toFixed(1)} (${f.baseline.cpuUsPerRequest.toFixed(1)}) | ${service ? service.cpuUsPerRequest.toFixed(1) : '–'} |`,
    )
  }
  return lines
}

function targetTable(report: BenchReport): string[] {
  const goals = targets(report)
  if (goals.length === 0) return []
  return [
    '',
    'Targets (issue 22; 50 connections):',
    '',
    '| Target | Goal | Measured | Met |',
    '|---|---|---|---|',
    ...goals.map((g) => `| ${g.what} | ${g.goal} | ${g.measured} | ${g.met ? 'yes' : '**no**'} |`),
  ]
}

export function renderMarkdown(report: BenchReport): string {
  return [
    ...introduction(report),
    '',
    ...throughputTable(report),
    '',
    ...detailTable(report),
    ...tableSizeTable(report),
    ...appWithoutDatabaseTable(report),
    ...targetTable(report),
  ].join('\n')
}
