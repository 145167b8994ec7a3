// docs/fleet-report.md from one run of the fleet harness (run.ts): the fleet, each fault with what the
// callers saw, the overload's probes, the totals checked against the database, and whether each
// thing a fleet must hold, held.
import type { Counts } from './counts.ts'
import type { PatroniEvent } from './patroni-log.ts'
import type { TraceReport } from './trace.ts'

export interface PhaseReport extends Counts {
  name: string
  what: string
  notes: string[]
  /** How long the fault and what answered it took (Redis down 10 s, a deploy of three…). */
  actedMs: number
  /** From the fault to full service again. */
  recoveredMs: number
  /** The phase's window: the fault, full service, and a settling time after it. */
  windowMs: number
  haproxy: { retries: number; redispatches: number; responses5xx: number; queueMax: number }
  /** Patroni's decisions in the window, for a database fault. */
  timeline: PatroniEvent[] | undefined
}

export interface FloodReport {
  name: string
  connections: number
  seconds: number
  wrk: string
  probes: Array<{
    label: string
    /** Whether its p99 must stay within the probe timeout for the run to hold. */
    mustHold: boolean
    count: number
    /** Probes over the probe timeout or without a 200. */
    failed: number
    p50: number
    p99: number
    max: number
  }>
}

export interface FleetReport {
  began: string
  seconds: number
  quick: boolean
  machine: { cpus: number; memoryGb: number }
  versions: Record<string, string>
  setup: { instances: number; workers: number; users: number; userRetries: number }
  /** Patroni's settings as the running cluster reported them, and its members' roles at start. */
  patroni: { settings: Record<string, number | boolean | undefined>; roles: string[] }
  phases: PhaseReport[]
  floods: FloodReport[]
  /** The counts over the whole run. */
  totals: Counts
  canary: { creates: number; acknowledged: number }
  probeTimeoutMs: number
  /** One create sent with a sampled traceparent after the steady load (D23). */
  trace: TraceReport | undefined
}

/** A fault's Patroni timeline in the report, at most: the decisions come first. */
const TIMELINE_LINES = 20

const ms = (value: number) => `${Math.round(value).toLocaleString('en-US')} ms`
const n = (value: number) => value.toLocaleString('en-US')

function wrkSummary(wrk: string): string {
  const pick = (pattern: RegExp) => pattern.exec(wrk)?.[1]?.trim()
  const requests = pick(/(\d+) requests in/)
  const rps = pick(/Requests\/sec:\s+([\d.]+)/)
  const non2xx = pick(/Non-2xx or 3xx responses:\s+(\d+)/) ?? '0'
  const errors = pick(/Socket errors: ([^\n]+)/) ?? 'none'
  return `${n(Number(requests ?? 0))} requests (${n(Math.round(Number(rps ?? 0)))}/s), ${non2xx} non-2xx, socket errors: ${errors}`
}

/** One thing a fleet must hold, whether it did ('stated': a figure reported, not a bar). */
export interface Hold {
  what: string
  held: boolean | 'stated'
  detail: string
  /** A bar on time (a probe's p99): judged by the full run, printed but not asserted by the
   * quick run in CI, where timings are not asserted in tests. */
  timed?: boolean
}

const answersOf = (counts: Counts) =>
  Object.entries(counts.answers)
    .map(([status, count]) => `${n(count)} × ${status}`)
    .join(', ') || 'none'

/** What must hold over the run and in each fault, with the figures that show it. */
export function holds(report: FleetReport): Hold[] {
  const { totals } = report
  const list: Hold[] = []
  /** A count that must be 0 over the whole run; the faults it was not 0 in, named. */
  const none = (what: string, bad: (c: Counts) => number, unit: string, before = ''): Hold => {
    const where = report.phases.filter((p) => bad(p) > 0)
    const between = bad(totals) - where.reduce((sum, p) => sum + bad(p), 0)
    const named = where.map((p) => `${p.name}: ${bad(p)} ${unit}`)
    if (between > 0) named.push(`between the faults: ${between} ${unit}`)
    return {
      what,
      held: bad(totals) === 0,
      detail: `${before}${named.length === 0 ? '0 in every fault' : named.join('; ')}`,
    }
  }
  list.push(
    none(
      'No acknowledged create lost',
      (c) => c.lost,
      'missing',
      `${n(totals.acknowledged)} acknowledged creates, read back at the end: `,
    ),
  )
  list.push(none('No logical create stored twice', (c) => c.twice, 'stored twice'))
  list.push({
    what: 'Outcomes unknown: creates that failed to their caller yet were stored',
    held: 'stated',
    detail: `${totals.unknown} stored, of ${report.canary.creates - report.canary.acknowledged} canary creates that failed (no Idempotency-Key, one attempt) and ${totals.failures} user calls that failed after their retries`,
  })
  list.push(
    none(
      `No call failed to its caller after the SDK's retries (${report.setup.userRetries})`,
      (c) => c.failures,
      'calls',
    ),
  )
  list.push(none('No answer 500', (c) => c.answers['500'] ?? 0, '× 500'))
  list.push(
    none(
      'Every 503 says when to retry (`Retry-After`)',
      (c) => c.withoutRetryAfter,
      '503s without it',
    ),
  )
  list.push({
    what: 'No instance exited, no process or worker ended by an error',
    held: totals.exited.length === 0,
    detail:
      totals.exited.length === 0
        ? 'none'
        : totals.exited
            .slice(0, 3)
            .map((line) => `\`${line}\``)
            .join('<br>'),
  })
  for (const flood of report.floods) {
    for (const probe of flood.probes.filter((p) => p.mustHold)) {
      list.push({
        what: `${flood.name}: ${probe.label} within ${report.probeTimeoutMs} ms at p99`,
        held: probe.p99 < report.probeTimeoutMs,
        timed: true,
        detail: `p99 ${ms(probe.p99)} over ${n(probe.count)} probes (${probe.failed} over ${report.probeTimeoutMs} ms or failed)`,
      })
    }
  }
  const { trace } = report
  list.push({
    what: 'One create traced through the balancer, an instance, PgBouncer and Redis',
    held: trace?.continued === true && trace.spans.some((span) => span.peer !== undefined),
    detail:
      trace === undefined
        ? 'no trace collected'
        : `${trace.spans.length} spans in the caller's trace; its span the server span's parent: ${trace.continued ? 'yes' : 'no'}`,
  })
  return list
}

export function renderFleet(report: FleetReport): { markdown: string; held: boolean } {
  const list = holds(report)
  const held = list.every((h) => h.held !== false)
  const { versions, setup, totals } = report
  const lines: string[] = []
  const add = (...more: string[]) => lines.push(...more)
  add(
    '# The fleet, through its faults',
    '',
    'Written by `npm run fleet` (scripts/fleet/run.ts) from its last full run; do not edit by hand. How the fleet is built and run is in [fleet.md](fleet.md).',
    '',
    `Run of ${report.began}, ${Math.round(report.seconds)} s, on ${report.machine.cpus} cores and ${report.machine.memoryGb} GiB, every part on the same machine.`,
    '',
    '## The fleet',
    '',
    `- The Patroni reference topology of [deploy/patroni](../deploy/patroni/README.md), its files as they are (D30): three etcd members (${versions.etcd}); three PostgreSQL members under Patroni (${versions.patroni}; ${versions.postgres}), \`synchronous_mode_strict\`, \`ttl\` 20 s; HAProxy sending connections to the member whose \`/primary\` answers 200; PgBouncer in transaction mode in front of it (${versions.pgbouncer}).`,
    `- Patroni's settings as the cluster reported them (\`GET /config\`): ${Object.entries(
      report.patroni.settings,
    )
      .map(([name, value]) => `\`${name}\` ${value}`)
      .join(', ')}; at the start, ${report.patroni.roles.join(', ')}.`,
    `- Redis for the rate-limit counts; ${versions.redis}.`,
    `- ${setup.instances} instances, \`petstore serve --workers ${setup.workers}\` each, load shedding on (D16); Node.js ${versions.node}.`,
    `- HAProxy with docs/fleet.md's configuration in front of the instances, health-checking \`/readyz\`; ${versions.haproxy}.`,
    `- ${setup.users} users of the SDK (\`petstore-client\`, ${setup.userRetries} retries, an \`Idempotency-Key\` on every create), each creating a pet, reading it back and paging, for the whole run; and a canary, five times a second, creating without a key and reading the pet back, one attempt each.`,
    '',
    '## What a fleet must hold',
    '',
    '| | Held | |',
    '|---|---|---|',
    ...list.map(
      (h) =>
        `| ${h.what} | ${h.held === 'stated' ? 'stated' : h.held ? 'yes' : '**no**'} | ${h.detail} |`,
    ),
    '',
    '## Each fault',
    '',
    "Full service: every instance answers `/readyz` 200 and the canary's create and read through the balancer succeed at their first attempt. It is checked every 100 ms once the fault and what answers it (a restart, Patroni's election) are done, and timed from the fault's start. A fault's window runs from the fault to full service and 2 s more; calls are counted in the window they began in, and each create against the final read. The write gap is the longest stretch in the window without an acknowledged create, from the last one before the fault. The steps run one after another without a person: an operator's own reaction time comes on top.",
    '',
    '| Fault | Fault and its answer | To full service | Write gap | SDK calls | Failed to the caller | SDK retries | Refusals (status) | Lost / twice / unknown | Exited |',
    '|---|--:|--:|--:|--:|--:|--:|---|--:|--:|',
  )
  for (const p of report.phases) {
    add(
      `| ${p.name} | ${ms(p.actedMs)} | ${p.name === 'Steady load' ? '' : ms(p.recoveredMs)} | ${ms(p.writeGapMs)} | ${n(p.calls)} | ${p.failures} | ${n(p.retries)} | ${answersOf(p)} | ${p.lost} / ${p.twice} / ${p.unknown} | ${p.exited.length} |`,
    )
  }
  add('')
  for (const p of report.phases) {
    add(`- **${p.name}**: ${p.what}.${p.notes.length ? ` ${p.notes.join('; ')}.` : ''}`)
    if (p.failureKinds.length)
      add(`  Failures seen by callers: ${p.failureKinds.map((k) => `\`${k}\``).join(', ')}.`)
    if (
      p.haproxy.retries + p.haproxy.redispatches + p.haproxy.responses5xx + p.haproxy.queueMax >
      0
    )
      add(
        `  HAProxy: ${p.haproxy.retries} retries, ${p.haproxy.redispatches} redispatches, ${p.haproxy.responses5xx} answers 5xx, at most ${p.haproxy.queueMax} queued.`,
      )
    if (p.timeline?.length) {
      add("  Patroni's log:")
      for (const event of p.timeline.slice(0, TIMELINE_LINES)) {
        add(
          `  - +${(event.atMs / 1000).toFixed(1)} s ${event.member}: ${event.message.replaceAll('|', '\\|')}`,
        )
      }
      if (p.timeline.length > TIMELINE_LINES)
        add(`  - and ${p.timeline.length - TIMELINE_LINES} more lines`)
    }
  }
  add('')
  if (report.floods.length > 0) {
    add(
      '## Overload',
      '',
      `Probes on fresh connections every 100 ms per URL, as an orchestrator's liveness probes are, sent straight to the instances. A probe over ${report.probeTimeoutMs} ms (Kubernetes' default timeout) counts as failed; one refused, reset or never answered counts 5 s.`,
      '',
      '| Flood | Probed | Probes | p50 | p99 | max | over 1 s or failed |',
      '|---|---|--:|--:|--:|--:|--:|',
    )
    for (const flood of report.floods) {
      for (const p of flood.probes) {
        add(
          `| ${flood.name} | ${p.label} | ${n(p.count)} | ${ms(p.p50)} | ${ms(p.p99)} | ${ms(p.max)} | ${p.failed} |`,
        )
      }
    }
    add('')
    for (const flood of report.floods) {
      add(
        `- **${flood.name}**: ${n(flood.connections)} connections for ${flood.seconds} s: ${wrkSummary(flood.wrk)}.`,
      )
    }
    add('')
  }
  const { trace } = report
  if (trace !== undefined) {
    add(
      '## One create, traced',
      '',
      `Sent to the balancer with a sampled \`traceparent\` after the steady load, under it; trace \`${trace.traceId}\` as the receiver got it, each span under its parent, with where a client span went (PgBouncer's port for the queries, Redis's for the rate limit):`,
      '',
      '| Span | To | Duration |',
      '|---|---|--:|',
    )
    for (const span of trace.spans) {
      const indent = '&nbsp;&nbsp;'.repeat(span.depth * 2)
      add(`| ${indent}\`${span.name}\` | ${span.peer ?? ''} | ${span.durationMs.toFixed(2)} ms |`)
    }
    add('')
  }
  add(
    '## Totals, checked against the database',
    '',
    `${n(totals.calls)} SDK calls, ${totals.failures} failed to their caller, ${n(totals.retries)} retries; refusals the users' attempts got: ${answersOf(totals)}. ${n(totals.acknowledged)} creates acknowledged (the canary's ${n(report.canary.acknowledged)} of its ${n(report.canary.creates)} among them); read from the leader at the end: ${totals.lost} missing, ${totals.twice} stored twice, ${totals.unknown} stored whose caller got an error.`,
    '',
    'Versions:',
    '',
    ...Object.entries(versions).map(([name, version]) => `- ${name}: ${version}`),
    '',
  )
  return { markdown: lines.join('\n'), held }
}
