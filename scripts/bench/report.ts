// The benchmark's report: its JSON shape, the Markdown tables, and the targets it is held to.
import type { RunFigures } from './load.ts'

/** Ratios of one server's figures to another's (the load core's share has none). */
export type Ratios = Omit<RunFigures, 'loadCoreBusy'>

export interface Round {
  service: RunFigures
  /** The ceiling, or (table-size comparison) the service on the 1k table. */
  baseline: RunFigures
  /** The database limit (db-limit.ts), measured on the read operations only. */
  dbLimit?: RunFigures
}

export interface PairResult {
  scenario: string
  label: string
  connections: number
  rounds: Round[]
  /** Medians over the rounds. */
  service: RunFigures
  baseline: RunFigures
  /** Medians of the per-round ratios service ÷ baseline. */
  ratio: Ratios
  /** Reads: the database limit's medians, and the medians of the per-round service ÷ it. */
  dbLimit?: RunFigures
  dbLimitRatio?: Ratios
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
  pairs: PairResult[]
  tableSize: PairResult | null
  /** The service's app without its database (floor.ts) against the ceiling. */
  floor: PairResult[]
}

const int = (n: number) => Math.round(n).toLocaleString('en')
const ms = (n: number) => n.toFixed(2)
const x = (n: number) => `${n.toFixed(2)}×`

interface Target {
  what: string
  goal: string
  measured: string
  met: boolean
}

function targets(report: BenchReport): Target[] {
  const at50 = (id: string) => report.pairs.find((p) => p.scenario === id && p.connections === 50)
  const out: Target[] = []
  const ratioTarget = (
    ids: string[],
    what: string,
    min: number,
    reference: 'the database limit' | 'the ceiling',
  ) => {
    const found = ids.map(at50).filter((p) => p !== undefined)
    const ratios = found.map((p) => (reference === 'the ceiling' ? p.ratio : p.dbLimitRatio))
    const measured = ratios.filter((r) => r !== undefined)
    if (measured.length === 0) return
    out.push({
      what,
      goal: `≥ ${min.toFixed(2)}× ${reference}`,
      measured: measured.map((r) => x(r.rps)).join(', '),
      met: measured.every((r) => r.rps >= min),
    })
  }
  // Issue 15: reads against what a server reading this database can do, writes (which the
  // database limit does not answer) against the ceiling.
  ratioTarget(
    ['list20', 'list100', 'status', 'deep'],
    'listPets `limit=20`, `limit=100`, status filter, deep cursor page',
    0.8,
    'the database limit',
  )
  ratioTarget(['get'], 'getPet', 0.8, 'the database limit')
  ratioTarget(
    ['create', 'createKeyed'],
    'createPet, durable; with `Idempotency-Key`',
    0.7,
    'the ceiling',
  )
  const all50 = report.pairs.filter((p) => p.connections === 50)
  if (all50.length > 0) {
    const worstP99 = Math.max(...all50.map((p) => p.service.p99))
    out.push({
      what: 'p99 latency, every operation',
      goal: '≤ 10 ms',
      measured: `worst ${ms(worstP99)} ms`,
      met: worstP99 <= 10,
    })
    const worstRss = Math.max(...report.pairs.map((p) => p.service.rssMb))
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

const percent = (share: number) => `${Math.round(share * 100)}%`

/**
 * How busy the load generator's core was: over every measured run, and over the ceiling's,
 * the fastest server and so the load generator's hardest work. Far below 100%, wrk was not
 * what limited a figure.
 */
function loadCoreSentence(report: BenchReport): string {
  const rounds = report.pairs.flatMap((p) => p.rounds)
  const all = rounds
    .flatMap((r) => [r.service, r.baseline, r.dbLimit])
    .filter((f) => f !== undefined)
    .map((f) => f.loadCoreBusy)
  const ceiling = rounds.map((r) => r.baseline.loadCoreBusy)
  if (all.length === 0 || all.some(Number.isNaN)) return ''
  return ` The load generator's core was busy ${percent(Math.min(...all))}–${percent(Math.max(...all))} of each run (whoever used it), at most ${percent(Math.max(...ceiling))} while the ceiling answered.`
}

export function renderMarkdown(report: BenchReport): string {
  const { settings, machine, versions, conditions } = report
  const lines: string[] = []
  lines.push(
    `Run of ${report.date.slice(0, 16).replace('T', ' ')} UTC (${settings.mode}, ${report.durationSeconds} s): ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGb} GB; Node.js ${versions.node}, Fastify ${versions.fastify}, SQLite ${versions.sqlite}, wrk ${versions.wrk}.`,
    '',
    `${int(settings.pets)} pets in the SQLite file; ${settings.rounds} alternating rounds of ${settings.seconds} s per figure after ${settings.warmupSeconds} s of warm-up on each side; ${settings.pinning ? `servers pinned to core ${settings.pinning.server}, load generator to core ${settings.pinning.load}` : 'no pinning (taskset missing)'}. While it ran, other processes used ${conditions.otherProcessesCores.toFixed(2)} of the ${machine.cores} cores on average and the hypervisor took ${conditions.stolenCores.toFixed(2)} (load average before/after: ${conditions.loadAverageBefore.map((n) => n.toFixed(2)).join(' ')} / ${conditions.loadAverageAfter.map((n) => n.toFixed(2)).join(' ')}).${loadCoreSentence(report)}`,
    '',
    'Each figure is the median over the rounds; each ratio is the median of the per-round ratios service ÷ reference (for req/s higher is better, for the rest lower is). Two references, measured in the same alternating rounds: the **database limit** (a raw `node:http` server running the same SQLite queries for each request; reads only) and the **ceiling** (a raw `node:http` server answering precomputed bytes). CPU is the server process’s user + system time per request. Latency, RSS and CPU read service (database limit / ceiling).',
    '',
    '| Operation | Conn. | req/s service | req/s db limit | req/s ceiling | **÷ db limit** | **÷ ceiling** | p50 ms | p99 ms | RSS MB | CPU µs/req |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  )
  for (const p of report.pairs) {
    const db = p.dbLimit
    /** "service (db limit / ceiling)", a dash where the database limit was not measured. */
    const three = (pick: (f: RunFigures) => number, format: (n: number) => string) =>
      `${format(pick(p.service))} (${db ? format(pick(db)) : '–'} / ${format(pick(p.baseline))})`
    const cells = [
      p.label,
      p.connections,
      int(p.service.rps),
      db ? int(db.rps) : '–',
      int(p.baseline.rps),
      p.dbLimitRatio ? `**${x(p.dbLimitRatio.rps)}**` : '–',
      `**${x(p.ratio.rps)}**`,
      three((f) => f.p50, ms),
      three((f) => f.p99, ms),
      three(
        (f) => f.rssMb,
        (n) => n.toFixed(0),
      ),
      three(
        (f) => f.cpuUsPerRequest,
        (n) => n.toFixed(1),
      ),
    ]
    lines.push(`| ${cells.join(' | ')} |`)
  }
  const t = report.tableSize
  if (t) {
    lines.push(
      '',
      `Table size: listPets \`limit=20\` at ${t.connections} connections, the same service on ${int(settings.pets)} pets and on ${int(settings.smallPets)} pets, alternating.`,
      '',
      `| Table | req/s | p50 ms | p99 ms | CPU µs/req |`,
      '|---|--:|--:|--:|--:|',
      `| ${int(settings.smallPets)} pets | ${int(t.baseline.rps)} | ${ms(t.baseline.p50)} | ${ms(t.baseline.p99)} | ${t.baseline.cpuUsPerRequest.toFixed(1)} |`,
      `| ${int(settings.pets)} pets | ${int(t.service.rps)} | ${ms(t.service.p50)} | ${ms(t.service.p99)} | ${t.service.cpuUsPerRequest.toFixed(1)} |`,
      `| ${int(settings.pets)} : ${int(settings.smallPets)} | ${x(t.ratio.rps)} the throughput (${x(1 / t.ratio.rps)} slower) | | | |`,
    )
  }
  if (report.floor.length > 0) {
    lines.push(
      '',
      'Where the time goes: the same app (every plugin, hook, schema and header) with the database taken out (`scripts/bench/floor.ts`: the seeded pets computed in memory, identical bodies), against the ceiling in the same way, at 50 connections.',
      '',
      '| Operation | req/s floor | req/s ceiling | **ratio** | p99 ms floor | CPU µs/req floor (ceiling) | CPU µs/req service (from the table above) |',
      '|---|--:|--:|--:|--:|--:|--:|',
    )
    for (const f of report.floor) {
      const service = report.pairs.find((p) => p.scenario === f.scenario && p.connections === 50)
      lines.push(
        `| ${f.label} | ${int(f.service.rps)} | ${int(f.baseline.rps)} | **${x(f.ratio.rps)}** | ${ms(f.service.p99)} | ${f.service.cpuUsPerRequest.toFixed(1)} (${f.baseline.cpuUsPerRequest.toFixed(1)}) | ${service ? service.service.cpuUsPerRequest.toFixed(1) : '–'} |`,
      )
    }
  }
  const goals = targets(report)
  if (goals.length > 0) {
    lines.push(
      '',
      'Targets (50 connections):',
      '',
      '| Target | Goal | Measured | Met |',
      '|---|---|---|---|',
    )
    for (const g of goals)
      lines.push(`| ${g.what} | ${g.goal} | ${g.measured} | ${g.met ? 'yes' : '**no**'} |`)
  }
  return lines.join('\n')
}
