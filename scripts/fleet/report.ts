// docs/fleet-report.md from one run of the fleet harness (run.ts): the fleet, each fault with what the
// callers saw, the overload's probes, the totals checked against the database, and whether each
// thing a fleet must hold, held.
import type { StoredCheck } from '../../test/helpers/fleet-users.ts'
import type { TraceReport } from './trace.ts'

export interface PhaseReport {
  name: string
  what: string
  notes: string[]
  /** How long the fault and the operator's steps took (Redis down 10 s, a deploy of three…). */
  actedMs: number
  /** From the fault to full service again. */
  recoveredMs: number
  /** The phase's window: the fault, full service, and a settling time after it. */
  windowMs: number
  /** SDK calls that began in the window, and those that failed to their caller. */
  calls: number
  failures: number
  failureKinds: string[]
  /** The last failed call's end, from the fault. */
  lastFailureMs: number | undefined
  /** Retries the SDK made in the window. */
  retries: number
  haproxy: { retries: number; redispatches: number; responses5xx: number; queueMax: number }
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
  setup: { instances: number; workers: number; users: number }
  phases: PhaseReport[]
  floods: FloodReport[]
  totals: {
    calls: number
    failures: number
    retries: number
    acknowledged: number
    unacknowledged: number
  }
  users: StoredCheck
  canary: StoredCheck & { acknowledged: number }
  probeTimeoutMs: number
  /** One create sent with a sampled traceparent after the steady load (D23). */
  trace: TraceReport | undefined
  /** Log lines of processes or workers that ended by an error. */
  processErrors: string[]
}

/** Faults through which no call may fail to its caller. */
const NO_FAILURE = [
  'Steady load',
  'Rolling restart',
  'SIGKILL',
  'Redis stopped',
  'PgBouncer restarted',
]

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

export function renderFleet(report: FleetReport): { markdown: string; held: boolean } {
  /** What must hold, whether it did ('stated': a figure the run reports, not a bar), the detail. */
  const holds: Array<[string, boolean | 'stated', string]> = []
  const lost = report.users.lost.length + report.canary.lost.length
  holds.push([
    'No acknowledged create lost',
    lost === 0,
    `${n(report.totals.acknowledged + report.canary.acknowledged)} acknowledged creates, ${lost} missing or stored otherwise, read from the promoted replica`,
  ])
  const twice = report.users.twice.length + report.canary.twice.length
  holds.push([
    'Exactly one pet per logical create',
    twice === 0,
    `${twice} names stored twice; ${report.users.unacknowledgedStored + report.canary.unacknowledgedStored} pets stored for creates whose caller got an error (the create had committed before the answer was lost)`,
  ])
  for (const phase of report.phases.filter((p) => NO_FAILURE.includes(p.name))) {
    holds.push([
      `No call failed to its caller: ${phase.name}`,
      phase.failures === 0,
      `${phase.failures} of ${n(phase.calls)} calls`,
    ])
  }
  const failover = report.phases.find((p) => p.name === 'PostgreSQL failover')
  if (failover) {
    holds.push([
      'Failover: calls may fail only where their retries are shorter than the outage; how many, and how long it was',
      'stated',
      `${failover.failures} of ${n(failover.calls)} calls failed; full service ${ms(failover.recoveredMs)} after the primary stopped${failover.lastFailureMs === undefined ? '' : `; the last failure ended ${ms(failover.lastFailureMs)} after it`}`,
    ])
  }
  for (const flood of report.floods) {
    for (const probe of flood.probes.filter((p) => p.mustHold)) {
      holds.push([
        `${flood.name}: ${probe.label} within ${report.probeTimeoutMs} ms at p99`,
        probe.p99 < report.probeTimeoutMs,
        `p99 ${ms(probe.p99)} over ${n(probe.count)} probes (${probe.failed} over ${report.probeTimeoutMs} ms or failed)`,
      ])
    }
  }
  holds.push([
    'No process ended by an error',
    report.processErrors.length === 0,
    report.processErrors.length === 0
      ? 'no worker or primary logged an uncaught error, an unexpected exit or a failed drain'
      : report.processErrors
          .slice(0, 3)
          .map((line) => `\`${line.slice(0, 200)}\``)
          .join('<br>'),
  ])
  const { trace } = report
  holds.push([
    'One create traced through the balancer, an instance, PgBouncer and Redis',
    trace?.continued === true && trace.spans.some((span) => span.peer !== undefined),
    trace === undefined
      ? 'no trace collected'
      : `${trace.spans.length} spans in the caller's trace; its span the server span's parent: ${trace.continued ? 'yes' : 'no'}`,
  ])
  const held = holds.every(([, ok]) => ok !== false)

  const lines: string[] = []
  lines.push('# The fleet, through its faults')
  lines.push('')
  lines.push(
    'Written by `npm run fleet` (scripts/fleet/run.ts) from its last full run; do not edit by hand. How the fleet is built and run is in [fleet.md](fleet.md).',
  )
  lines.push('')
  lines.push(
    `Run of ${report.began}, ${Math.round(report.seconds)} s, on ${report.machine.cpus} cores and ${report.machine.memoryGb} GiB, every part on the same machine.`,
  )
  lines.push('')
  lines.push('## The fleet')
  lines.push('')
  lines.push(
    `- PostgreSQL primary and a synchronous streaming replica (\`synchronous_standby_names\`, \`synchronous_commit = on\`); ${report.versions.postgres}.`,
  )
  lines.push(`- PgBouncer in transaction mode in front of it; ${report.versions.pgbouncer}.`)
  lines.push(`- Redis for the rate-limit counts; ${report.versions.redis}.`)
  lines.push(
    `- ${report.setup.instances} instances, \`petstore serve --workers ${report.setup.workers}\` each, load shedding on (D16); Node.js ${report.versions.node}.`,
  )
  lines.push(
    `- HAProxy with docs/fleet.md's configuration, health-checking \`/readyz\`; ${report.versions.haproxy}.`,
  )
  lines.push(
    `- ${report.setup.users} users of the SDK (\`petstore-client\`: 2 retries, automatic idempotency keys), each creating a pet, reading it back and paging, for the whole run.`,
  )
  lines.push('')
  lines.push('## What a fleet must hold')
  lines.push('')
  lines.push('| | Held | |')
  lines.push('|---|---|---|')
  for (const [what, ok, detail] of holds)
    lines.push(`| ${what} | ${ok === 'stated' ? 'stated' : ok ? 'yes' : '**no**'} | ${detail} |`)
  lines.push('')
  lines.push('## Each fault')
  lines.push('')
  lines.push(
    "Full service: every instance answers `/readyz` 200 and a create and a read through the balancer succeed at their first attempt. It is checked every 100 ms once the fault and the steps that answer it (a restart, a promotion) are done, and timed from the fault's start. A fault's window runs from the fault to full service and 2 s more; calls are counted in the window they began in. The steps run one after another without a person: an operator's own reaction time comes on top.",
  )
  lines.push('')
  lines.push(
    '| Fault | Fault and its steps | To full service | SDK calls | Failed to the caller | SDK retries | HAProxy retries / redispatches | HAProxy 5xx | HAProxy queue, most |',
  )
  lines.push('|---|--:|--:|--:|--:|--:|--:|--:|--:|')
  for (const p of report.phases) {
    lines.push(
      `| ${p.name} | ${ms(p.actedMs)} | ${p.name === 'Steady load' ? '' : ms(p.recoveredMs)} | ${n(p.calls)} | ${p.failures} | ${n(p.retries)} | ${p.haproxy.retries} / ${p.haproxy.redispatches} | ${p.haproxy.responses5xx} | ${p.haproxy.queueMax} |`,
    )
  }
  lines.push('')
  for (const p of report.phases) {
    lines.push(`- **${p.name}**: ${p.what}.${p.notes.length ? ` ${p.notes.join('; ')}.` : ''}`)
    if (p.failureKinds.length)
      lines.push(`  Failures seen by callers: ${p.failureKinds.map((k) => `\`${k}\``).join(', ')}.`)
  }
  lines.push('')
  if (report.floods.length > 0) {
    lines.push('## Overload')
    lines.push('')
    lines.push(
      `Probes on fresh connections every 100 ms per URL, as an orchestrator's liveness probes are, sent straight to the instances. A probe over ${report.probeTimeoutMs} ms (Kubernetes' default timeout) counts as failed; one refused, reset or never answered counts 5 s.`,
    )
    lines.push('')
    lines.push('| Flood | Probed | Probes | p50 | p99 | max | over 1 s or failed |')
    lines.push('|---|---|--:|--:|--:|--:|--:|')
    for (const flood of report.floods) {
      for (const p of flood.probes) {
        lines.push(
          `| ${flood.name} | ${p.label} | ${n(p.count)} | ${ms(p.p50)} | ${ms(p.p99)} | ${ms(p.max)} | ${p.failed} |`,
        )
      }
    }
    lines.push('')
    for (const flood of report.floods) {
      lines.push(
        `- **${flood.name}**: ${n(flood.connections)} connections for ${flood.seconds} s: ${wrkSummary(flood.wrk)}.`,
      )
    }
    lines.push('')
  }
  if (trace !== undefined) {
    lines.push('## One create, traced')
    lines.push('')
    lines.push(
      `Sent to the balancer with a sampled \`traceparent\` after the steady load, under it; trace \`${trace.traceId}\` as the receiver got it, each span under its parent, with where a client span went (PgBouncer's port for the queries, Redis's for the rate limit):`,
    )
    lines.push('')
    lines.push('| Span | To | Duration |')
    lines.push('|---|---|--:|')
    for (const span of trace.spans) {
      const indent = '&nbsp;&nbsp;'.repeat(span.depth * 2)
      lines.push(
        `| ${indent}\`${span.name}\` | ${span.peer ?? ''} | ${span.durationMs.toFixed(2)} ms |`,
      )
    }
    lines.push('')
  }
  lines.push('## Totals, checked against the database')
  lines.push('')
  lines.push(
    `${n(report.totals.calls)} SDK calls, ${report.totals.failures} failed to their caller, ${n(report.totals.retries)} retries. ${n(report.totals.acknowledged)} creates acknowledged, ${report.totals.unacknowledged} failed to their caller. The database (the promoted replica) holds ${n(report.users.stored)} of the users' pets: ${report.users.lost.length} acknowledged pets missing, ${report.users.twice.length} names twice, ${report.users.unacknowledgedStored} pets whose create failed to its caller. The canary made ${n(report.canary.acknowledged)} more, ${report.canary.lost.length} missing, ${report.canary.twice.length} twice.`,
  )
  lines.push('')
  lines.push('Versions:')
  lines.push('')
  for (const [name, version] of Object.entries(report.versions)) lines.push(`- ${name}: ${version}`)
  lines.push('')
  return { markdown: lines.join('\n'), held }
}
