// The SQLite run of `npm run bench`: our service beside its references, side by side in one run,
// and its report, the section of docs/benchmarks.md between the markers bench:begin/end and
// docs/benchmarks.json.
//
// The service as an operator runs it (bin/petstore.js serve) on a SQLite file seeded with
// 1,000,000 pets, and beside it, on the same file: the same bytes (same-bytes.ts: raw node:http
// running our SQL and sending our bodies and response headers, createPet durable with a group
// commit, a keyed one with its Idempotency-Key's record in the same transaction) and the
// framework floor (fastify-floor.ts: bare Fastify doing the same). Each reference's answers are
// checked against the service's first. Then each operation at 10 and 50 keep-alive connections,
// the service and every reference once per round, their order rotating from round to round so
// that drift hits all of them; and the table sizes (the same service on 1,000 pets). Figures are
// medians over the rounds; ratios are medians of the per-round ratios.
import { readFileSync } from 'node:fs'
import { cpus, loadavg, totalmem } from 'node:os'
import { join } from 'node:path'
import {
  alternate,
  BENCH_DIR,
  cpuSeconds,
  cpuTicks,
  int,
  keeper,
  log,
  medianFigures,
  medianRatios,
  ms,
  type Operation,
  type PairResult,
  pair,
  pinning,
  pinSelf,
  type Ratios,
  ROOT,
  type RunFigures,
  type RunSettings,
  type ServerProcess,
  selectOperations,
  serviceEnv,
  startReference,
  startService,
  stopAll,
  times,
  writeReport,
  wrkVersion,
} from './harness.ts'
import { seededCopy } from './seed.ts'

/** The run's servers: the service, the same bytes (same-bytes.ts), the floor (fastify-floor.ts). */
type Role = 'service' | 'sameBytes' | 'framework'
const ROLES: readonly Role[] = ['service', 'sameBytes', 'framework']
const ROLE_NAMES: Record<Role, string> = {
  service: 'service',
  sameBytes: 'same bytes',
  framework: 'framework floor',
}

/** One round's figures, for each server measured in it. */
type RoleRound = Partial<Record<Role, RunFigures>>

/** One operation at one connection count: the service and its references in the same rounds. */
interface Comparison {
  scenario: string
  label: string
  connections: number
  rounds: RoleRound[]
  /** Medians over the rounds, for each server measured. */
  figures: RoleRound
  /** Medians of per-round ratios; each present when both of its servers were measured. */
  ratios: {
    /** The targets' ratio. */
    serviceToSameBytes?: Ratios
    /** What the service adds to bare Fastify. */
    serviceToFramework?: Ratios
    /** What bare Fastify adds to node:http. */
    frameworkToSameBytes?: Ratios
  }
}

interface BenchReport {
  date: string
  durationSeconds: number
  machine: { cpu: string; cores: number; memoryGb: number }
  versions: { node: string; fastify: string; sqlite: string; wrk: string }
  settings: Pick<
    RunSettings,
    'mode' | 'pets' | 'smallPets' | 'rounds' | 'seconds' | 'warmupSeconds' | 'connections'
  > & { pinning: { server: string; load: string } | null; scenarios: string[] }
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
}

/** Every operation and connection count, and the table sizes before the creates grow the table. */
async function measureAll(
  settings: RunSettings,
  servers: Record<Role, ServerProcess> & { small: ServerProcess },
): Promise<Pick<BenchReport, 'comparisons' | 'tableSize'>> {
  const comparisons: Comparison[] = []
  let tableSize: PairResult | null = null
  const compareTableSizes = async () => {
    log(`table size: listPets limit=20 on ${settings.pets} vs ${settings.smallPets} pets`)
    const [list20] = selectOperations(settings.pets, 'list20') as [Operation]
    const result = await pair(settings, list20, 50, servers.service, servers.small)
    return {
      ...result,
      scenario: 'table-size',
      label: 'listPets `limit=20`, big table vs 1k table',
    }
  }
  const present = ROLES.map((role) => [role, servers[role]] as const)
  for (const operation of selectOperations(settings.pets, settings.only)) {
    if (operation.id === 'create' && tableSize === null && settings.only === undefined) {
      tableSize = await compareTableSizes()
    }
    log(operation.label)
    for (const connections of settings.connections) {
      const rounds = await alternate(settings, operation, connections, present, 'service')
      const figures: RoleRound = {}
      for (const role of ROLES) figures[role] = medianFigures(rounds.map((r) => r[role]))
      const ratios: Comparison['ratios'] = {
        serviceToSameBytes: medianRatios(rounds, 'service', 'sameBytes'),
        serviceToFramework: medianRatios(rounds, 'service', 'framework'),
        frameworkToSameBytes: medianRatios(rounds, 'framework', 'sameBytes'),
      }
      const { id: scenario, label } = operation
      comparisons.push({ scenario, label, connections, rounds, figures, ratios })
    }
  }
  if (tableSize === null && settings.only === undefined) tableSize = await compareTableSizes()
  return { comparisons, tableSize }
}

/**
 * What the rest of the machine did during `work` (other people's tests share these cores), in
 * cores on average: CPU time not used by `servers` or this process, and time stolen.
 */
async function othersDuring<T>(
  servers: ServerProcess[],
  work: () => Promise<T>,
): Promise<{ result: T; otherProcessesCores: number; stolenCores: number }> {
  const ours = () =>
    servers.reduce((sum, s) => sum + cpuSeconds(s.pid), 0) +
    (process.cpuUsage().user + process.cpuUsage().system) / 1e6
  const [machineBefore, oursBefore, wallBefore] = [cpuTicks('cpu'), ours(), performance.now()]
  const result = await work()
  const machineAfter = cpuTicks('cpu')
  // Clock ticks are hundredths of a second.
  const seconds = (performance.now() - wallBefore) / 1000
  const busy = (machineAfter.busy - machineBefore.busy) / 100 - (ours() - oursBefore)
  return {
    result,
    otherProcessesCores: Math.max(0, busy / seconds),
    stolenCores: (machineAfter.steal - machineBefore.steal) / 100 / seconds,
  }
}

function packageVersion(name: string): string {
  const json = readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')
  return (JSON.parse(json) as { version: string }).version
}

/** The SQLite run: the service beside its references, and the table sizes. */
export async function benchSqlite(settings: RunSettings): Promise<void> {
  const startedAt = new Date()
  const started = performance.now()
  const loadBefore = loadavg()
  const bigDb = await seededCopy(settings.pets, `run-${settings.pets}`)
  const smallDb = await seededCopy(settings.smallPets, `run-${settings.smallPets}`)
  pinSelf()
  const running: ServerProcess[] = []
  const keep = keeper(running)
  process.on('SIGINT', () => {
    stopAll(running).then(() => process.exit(130))
  })
  let report: BenchReport
  try {
    const profile = ['--cpu-prof', `--cpu-prof-dir=${join(BENCH_DIR, 'profiles')}`]
    const nodeArgs = settings.profile ? profile : []
    const env = (db: string) => serviceEnv(settings.key, { sqlite: db })
    const service = await keep(startService('service', env(bigDb), { nodeArgs }))
    // Every reference is checked on every operation.
    const all = selectOperations(settings.pets, undefined)
    const checked = { key: settings.key, service, checked: all }
    const servers = {
      service,
      sameBytes: await keep(startReference('same bytes', 'same-bytes.ts', bigDb, checked)),
      framework: await keep(startReference('framework floor', 'fastify-floor.ts', bigDb, checked)),
      small: await keep(startService('service-1k', env(smallDb), { nodeArgs })),
    }
    const measured = await othersDuring(running, () => measureAll(settings, servers))
    const { mode, pets, smallPets, rounds, seconds, warmupSeconds, connections } = settings
    const cpu = cpus()
    report = {
      date: startedAt.toISOString(),
      durationSeconds: Math.round((performance.now() - started) / 1000),
      machine: {
        cpu: cpu[0]?.model ?? 'unknown',
        cores: cpu.length,
        memoryGb: Math.round(totalmem() / 2 ** 30),
      },
      versions: {
        node: process.versions.node,
        fastify: packageVersion('fastify'),
        sqlite: process.versions.sqlite ?? 'unknown',
        wrk: wrkVersion(),
      },
      settings: {
        ...{ mode, pets, smallPets, rounds, seconds, warmupSeconds, connections },
        pinning: pinning ?? null,
        scenarios: selectOperations(pets, settings.only).map((s) => s.id),
      },
      conditions: {
        loadAverageBefore: loadBefore,
        loadAverageAfter: loadavg(),
        otherProcessesCores: measured.otherProcessesCores,
        stolenCores: measured.stolenCores,
      },
      ...measured.result,
    }
  } finally {
    await stopAll(running)
  }
  writeReport(settings.outBase, 'bench', report, renderMarkdown(report))
}

// --- the report --------------------------------------------------------------------------------

const percent = (share: number) => `${Math.round(share * 100)}%`

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
      measured: ratios.map((r) => times(r.rps)).join(', '),
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
  const lists = 'listPets `limit=20`, `limit=100`, status filter, deep cursor page'
  const creates =
    "createPet, durable; with a new `Idempotency-Key` each (against same bytes' keyed create)"
  const out: Target[] = [
    ...ratioTarget(at50, ['list20', 'list100', 'status', 'deep'], lists, 0.8),
    ...ratioTarget(at50, ['get'], 'getPet', 0.75),
    ...ratioTarget(at50, ['create', 'createKeyed'], creates, 0.75),
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
      measured: `${times(slower)} slower`,
      met: slower <= 1.2,
    })
  }
  return out
}

/** Every run's share of the load core. */
function loadShares(comparisons: Comparison[]): number[] {
  return comparisons
    .flatMap((c) => c.rounds)
    .flatMap((round) => ROLES.map((role) => round[role]?.loadCoreBusy))
    .filter((share) => share !== undefined)
}

function introduction(report: BenchReport): string[] {
  const { settings, machine, versions, conditions } = report
  const loads = (averages: number[]) => averages.map((n) => n.toFixed(2)).join(' ')
  const shares = loadShares(report.comparisons)
  // Far below 100%, wrk was not what limited a figure.
  const loadCore =
    shares.length === 0 || shares.some(Number.isNaN)
      ? ''
      : ` The load generator's core was busy ${percent(Math.min(...shares))}–${percent(Math.max(...shares))} of each run (whoever used it).`
  return [
    `Run of ${report.date.slice(0, 16).replace('T', ' ')} UTC (${settings.mode}, ${report.durationSeconds} s): ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGb} GB; Node.js ${versions.node}, Fastify ${versions.fastify}, SQLite ${versions.sqlite}, wrk ${versions.wrk}.`,
    '',
    `${int(settings.pets)} pets in the SQLite file; ${settings.rounds} rounds of ${settings.seconds} s per figure after ${settings.warmupSeconds} s of warm-up for each server, the servers' order rotating from round to round; ${settings.pinning ? `servers pinned to core ${settings.pinning.server}, wrk to core ${settings.pinning.load}` : 'no pinning (taskset missing)'}. While it ran, other processes used ${conditions.otherProcessesCores.toFixed(2)} of the ${machine.cores} cores on average and the hypervisor took ${conditions.stolenCores.toFixed(2)} (load average before/after: ${loads(conditions.loadAverageBefore)} / ${loads(conditions.loadAverageAfter)}).${loadCore}`,
    '',
    "Each figure is the median over the rounds; each ratio is the median of the per-round ratios (for req/s higher is better). The service and its references, measured in the same rounds on the same file: **same bytes** (raw `node:http`, the service's SQL, bodies and response headers, createPet durable with a group commit) and the **framework floor** (bare Fastify doing the same). req/s, p50 and p99 are wrk's; CPU is the server process's user + system time per request and RSS its peak, both read from `/proc`. With an `Idempotency-Key`, same bytes and the floor do the service's database work for it: its fingerprint of the body, then the pet and the key's record in the same durable transaction, by the service's own statements (keyed against keyed).",
  ]
}

/** The cell for one ratio, a dash where it was not measured. */
const ratioCell = (ratio: Ratios | undefined, bold = false) =>
  ratio === undefined ? '–' : bold ? `**${times(ratio.rps)}**` : times(ratio.rps)

function throughputTable(report: BenchReport): string[] {
  const lines = [
    `| Operation | Conn. | req/s ${ROLES.map((r) => ROLE_NAMES[r]).join(' | req/s ')} | **service ÷ same bytes** | service ÷ framework floor | framework floor ÷ same bytes | load core busy, at most |`,
    `|---|--:|${ROLES.map(() => '--:|').join('')}--:|--:|--:|--:|`,
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
    const cpu = each(
      (f) => f.cpuUsPerRequest,
      (n) => n.toFixed(1),
    )
    const rss = c.figures.service ? c.figures.service.rssMb.toFixed(0) : '–'
    const cells = [c.label, c.connections, each((f) => f.p50, ms), each((f) => f.p99, ms), cpu, rss]
    lines.push(`| ${cells.join(' | ')} |`)
  }
  return lines
}

function tableSizeTable(report: BenchReport): string[] {
  const t = report.tableSize
  if (!t) return []
  const { pets, smallPets } = report.settings
  const row = (what: string, f: RunFigures) =>
    `| ${what} | ${int(f.rps)} | ${ms(f.p50)} | ${ms(f.p99)} | ${f.cpuUsPerRequest.toFixed(1)} |`
  return [
    '',
    `Table size: listPets \`limit=20\` at ${t.connections} connections, the same service on ${int(pets)} pets and on ${int(smallPets)} pets, alternating.`,
    '',
    `| Table | req/s | p50 ms | p99 ms | CPU µs/req |`,
    '|---|--:|--:|--:|--:|',
    row(`${int(smallPets)} pets`, t.baseline),
    row(`${int(pets)} pets`, t.service),
    `| ${int(pets)} : ${int(smallPets)} | ${times(t.ratio.rps)} the throughput (${times(1 / t.ratio.rps)} slower) | | | |`,
  ]
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

function renderMarkdown(report: BenchReport): string {
  return [
    ...introduction(report),
    '',
    ...throughputTable(report),
    '',
    ...detailTable(report),
    ...tableSizeTable(report),
    ...targetTable(report),
  ].join('\n')
}
