// The Prometheus rules of deploy/monitoring/petstore.rules.yaml (D31), built from settings.ts:
// recording rules for the SLIs over the SRE Workbook's windows, the SLO burn-rate alerts, and the
// cause alerts for the failures docs/operations.md lists. `timeScale` divides every window and
// `for` by a factor, for a rehearsal on a test or staging Prometheus (the same rules, faster:
// docs/operations.md, Alerts); the rules' and series' names do not change with it.
import {
  API_ROUTES,
  BUDGET_PERIOD,
  BURN_WINDOWS,
  LATENCY_THRESHOLD_SECONDS,
  OBJECTIVES,
  type Objective,
  RUNBOOK_BASE,
  SELECTOR,
  THRESHOLDS,
} from './settings.ts'

export interface RecordingRule {
  record: string
  expr: string
  labels?: Record<string, string>
}

export type Severity = 'critical' | 'warning'

export interface AlertingRule {
  alert: string
  expr: string
  for?: string
  labels: { severity: Severity } & Record<string, string>
  annotations: { summary: string; description: string; runbook_url: string }
}

export type Rule = RecordingRule | AlertingRule

export interface RuleGroup {
  name: string
  rules: Rule[]
}

export interface RuleFile {
  groups: RuleGroup[]
}

export interface RuleOptions {
  /** Every range and `for` divided by this (1: as written). */
  timeScale?: number
}

const UNITS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const
type Unit = keyof typeof UNITS

/** Milliseconds of a Prometheus duration such as 5m or 1d (one unit). */
export function durationMs(duration: string): number {
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(duration)
  if (match === null) throw new Error(`not a duration: ${duration}`)
  return Number(match[1]) * UNITS[match[2] as Unit]
}

/** The largest unit that divides `ms` exactly: 300000 → 5m. */
export function formatDuration(ms: number): string {
  const whole = Math.max(1, Math.round(ms))
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    if (whole % UNITS[unit] === 0) return `${whole / UNITS[unit]}${unit}`
  }
  return `${whole}ms`
}

/** A rule's duration under a time scale. */
function scale(duration: string, timeScale: number): string {
  return formatDuration(durationMs(duration) / timeScale)
}

/** Every `[range]` of an expression under a time scale. */
function scaleRanges(expr: string, timeScale: number): string {
  return expr.replace(
    /\[(\d+(?:ms|s|m|h|d))\]/g,
    (_, range: string) => `[${scale(range, timeScale)}]`,
  )
}

const DURATION = 'http_server_request_duration_seconds'
/** The requests the objectives count: the API's, less the 429s (settings.ts says why). */
const API = `${SELECTOR},http_route=~"${API_ROUTES}",http_response_status_code!="429"`

/** The SLI's series: the share of bad requests over a window, labelled `slo`. */
export const errorRatio = (window: string) => `petstore:slo_error_ratio:rate${window}`
/** The objective, recorded once per SLO: the one place the alerts and the dashboard read it. */
export const OBJECTIVE = 'petstore:slo_objective:ratio'

/** Every window the alerts read, in ascending order. */
function windows(): string[] {
  const all = Object.values(BURN_WINDOWS).flatMap((pairs) =>
    pairs.flatMap((p) => [p.long, p.short]),
  )
  return [...new Set(all)].sort((a, b) => durationMs(a) - durationMs(b))
}

/**
 * Bad requests over a window, as a share of those that count. With no 5xx at all the
 * availability numerator has no series; `or … * 0` makes the ratio 0 rather than absent, so that
 * a healthy service shows 0 and its budget whole. A window without requests has no ratio (not
 * 0/0, NaN, which would make the period's average NaN for as long as it holds that window).
 */
function sliExpr(slo: Objective['slo'], window: string): string {
  const count = (matchers: string) =>
    `sum by (job) (rate(${DURATION}_count{${matchers}}[${window}]))`
  if (slo === 'availability') {
    const errors = count(`${API},http_response_status_code=~"5.."`)
    return `(\n  ${errors}\n  or\n  ${count(API)} * 0\n)\n/\n(${count(API)} > 0)`
  }
  const answered = `${API},http_response_status_code!~"5.."`
  const fast = `sum by (job) (rate(${DURATION}_bucket{${answered},le="${LATENCY_THRESHOLD_SECONDS}"}[${window}]))`
  return `1 - (\n  ${fast}\n  /\n  (${count(answered)} > 0)\n)`
}

function recordingRules(): Rule[] {
  const objectives: Rule[] = OBJECTIVES.map(({ slo, objective }) => ({
    record: OBJECTIVE,
    expr: `vector(${objective})`,
    labels: { slo },
  }))
  const ratios: Rule[] = OBJECTIVES.flatMap(({ slo }) =>
    windows().map((window) => ({
      record: errorRatio(window),
      expr: sliExpr(slo, window),
      labels: { slo },
    })),
  )
  // The whole period from the 5m ratios (Sloth's way): a 30-day rate of every histogram bucket
  // would be the most expensive query of the server, evaluated every interval.
  const period: Rule[] = OBJECTIVES.map(({ slo }) => ({
    record: errorRatio(BUDGET_PERIOD),
    expr: `avg_over_time(${errorRatio('5m')}{slo="${slo}"}[${BUDGET_PERIOD}])`,
    labels: { slo },
  }))
  return [...objectives, ...ratios, ...period]
}

function runbook(alert: string): string {
  return `${RUNBOOK_BASE}#${alert.toLowerCase()}`
}

/** Both windows of a pair burn faster than `factor`. */
function burning(slo: string, pair: { long: string; short: string; factor: number }): string {
  const over = (window: string) =>
    `${errorRatio(window)}{slo="${slo}"} > on (slo) group_left () (${pair.factor} * (1 - ${OBJECTIVE}{slo="${slo}"}))`
  return `(\n  ${over(pair.long)}\nand\n  ${over(pair.short)}\n)`
}

function burnAlerts({ slo, bad }: Objective): AlertingRule[] {
  const name = slo === 'availability' ? 'Availability' : 'Latency'
  const what = slo === 'availability' ? 'errors (5xx)' : 'slow answers'
  const page = `Petstore${name}BudgetBurnFast`
  const ticket = `Petstore${name}BudgetBurnSlow`
  return [
    {
      alert: page,
      expr: BURN_WINDOWS.page.map((pair) => burning(slo, pair)).join('\nor\n'),
      for: '2m',
      labels: { severity: 'critical', slo },
      annotations: {
        summary: `Petstore spends its ${slo} error budget fast: ${what}`,
        description: `{{ $value | humanizePercentage }} of the API's requests to {{ $labels.job }} were ${bad} over the last hour (or six): at this rate the ${BUDGET_PERIOD} error budget is gone within days.`,
        runbook_url: runbook(page),
      },
    },
    {
      alert: ticket,
      expr: BURN_WINDOWS.ticket.map((pair) => burning(slo, pair)).join('\nor\n'),
      for: '15m',
      labels: { severity: 'warning', slo },
      annotations: {
        summary: `Petstore spends its ${slo} error budget faster than it lasts: ${what}`,
        description: `{{ $value | humanizePercentage }} of the API's requests to {{ $labels.job }} were ${bad} over the last day (or three): at this rate the ${BUDGET_PERIOD} error budget is gone before the period ends.`,
        runbook_url: runbook(ticket),
      },
    },
  ]
}

interface Cause {
  alert: string
  expr: string
  for: string
  severity: Severity
  summary: string
  description: string
}

/** The cause alerts: what fails, per instance where it is per instance (docs/operations.md). */
function causes(): Cause[] {
  const t = THRESHOLDS
  return [
    {
      alert: 'PetstoreDown',
      expr: `sum by (job) (up{${SELECTOR}}) == 0\nor\nabsent(up{${SELECTOR}})`,
      for: '2m',
      severity: 'critical',
      summary: 'No instance of Petstore can be scraped',
      description:
        'Prometheus has scraped no instance of {{ $labels.job }} for 2 minutes, or has no target for it: the service is down, or its metrics port is not reachable.',
    },
    {
      alert: 'PetstoreInstanceDown',
      expr: `up{${SELECTOR}} == 0`,
      for: '5m',
      severity: 'warning',
      summary: 'An instance of Petstore cannot be scraped',
      description:
        '{{ $labels.instance }} ({{ $labels.job }}) has not answered a scrape for 5 minutes: it is down, its event loop is stalled, or its metrics port is unreachable.',
    },
    {
      alert: 'PetstoreStoreUnavailable',
      expr: `petstore_store_unavailable{${SELECTOR}} == 1`,
      for: '1m',
      severity: 'critical',
      summary: 'Petstore cannot use its database',
      description:
        '{{ $labels.instance }} ({{ $labels.job }}) has answered 503 for a minute because its database fails (unreachable, locked, full, read-only or an I/O error); its log says which, once.',
    },
    {
      alert: 'PetstoreNotReady',
      expr: `petstore_ready{${SELECTOR}} == 0`,
      for: '5m',
      severity: 'warning',
      summary: 'An instance of Petstore has failed readiness for 5 minutes',
      description:
        '{{ $labels.instance }} ({{ $labels.job }}) answers /readyz 503: its database does not answer (or cannot be written), or it is draining and has not stopped.',
    },
    {
      alert: 'PetstoreEventLoopLagging',
      expr: `nodejs_eventloop_lag_p99_seconds{${SELECTOR}} > ${t.eventLoopLagSeconds}`,
      for: '10m',
      severity: 'warning',
      summary: 'Petstore’s event loop is behind',
      description: `The event loop of {{ $labels.instance }} ({{ $labels.job }}) has been behind by {{ $value | humanizeDuration }} (p99) for 10 minutes, over the ${t.eventLoopLagSeconds * 1000} ms at which it sheds load: requests wait, and some get 503.`,
    },
    {
      alert: 'PetstoreMemoryNearLimit',
      expr: `process_resident_memory_bytes{${SELECTOR}}\n/\n(petstore_memory_limit_bytes{${SELECTOR}} > 0)\n> ${t.memoryShare}`,
      for: '10m',
      severity: 'warning',
      summary: 'Petstore’s memory is close to its container’s limit',
      description: `{{ $labels.instance }} ({{ $labels.job }}) has used {{ $value | humanizePercentage }} of its memory limit for 10 minutes; at the limit the kernel ends the process.`,
    },
    {
      alert: 'PetstoreHeapNearLimit',
      expr: `nodejs_heap_size_used_bytes{${SELECTOR}}\n/\npetstore_heap_size_limit_bytes{${SELECTOR}}\n> ${t.memoryShare}`,
      for: '10m',
      severity: 'warning',
      summary: 'Petstore’s JavaScript heap is close to V8’s limit',
      description:
        '{{ $labels.instance }} ({{ $labels.job }}) has used {{ $value | humanizePercentage }} of its heap limit for 10 minutes; at the limit the process ends with an out-of-memory error.',
    },
    {
      alert: 'PetstoreDatabasePoolWaiting',
      expr: `petstore_db_pool_requests_waiting{${SELECTOR}} > 0`,
      for: '5m',
      severity: 'warning',
      summary: 'Petstore’s queries wait for a database connection',
      description:
        '{{ $labels.instance }} ({{ $labels.job }}) has had {{ $value }} queries waiting for a pooled connection at every scrape for 5 minutes: the pool is too small or the database slow.',
    },
    {
      alert: 'PetstoreRedisUnreachable',
      expr: `max by (job, instance) (petstore_rate_limit_fail_open{${SELECTOR}}) > 0\nor\nmax by (job, instance) (petstore_auth_failure_counter_fail_open{${SELECTOR}}) > 0`,
      for: '2m',
      severity: 'warning',
      summary: 'Petstore’s limits fail open: Redis does not answer',
      description:
        '{{ $labels.instance }} ({{ $labels.job }}) has served for 2 minutes without its rate limit or its failed-authentication limit, because Redis fails.',
    },
    {
      alert: 'PetstoreFailedAuthenticationFlood',
      // 401s (a key refused, or none given; unknown keys of ours looked up in the store are among
      // them), or 429s to addresses past their failed authentications.
      expr: `sum by (job) (rate(${DURATION}_count{${SELECTOR},http_response_status_code="401"}[5m])) > ${t.failedAuthenticationsPerSecond}\nor\nsum by (job) (rate(petstore_auth_failure_limited_total{${SELECTOR}}[5m])) > ${t.failedAuthenticationsPerSecond}`,
      for: '10m',
      severity: 'warning',
      summary: 'Petstore refuses many API keys: someone is trying keys',
      description:
        '{{ $labels.job }} has refused {{ $value | humanize }} requests a second for 10 minutes for their key, or for their address past its failed authentications (credential stuffing, or a client with a revoked key).',
    },
    {
      alert: 'PetstoreLoadShedding',
      expr: `sum by (job, instance) (rate(petstore_load_shed_total{${SELECTOR}}[5m]))\n/\nsum by (job, instance) (rate(${DURATION}_count{${SELECTOR}}[5m]))\n> ${t.shedShare}`,
      for: '10m',
      severity: 'warning',
      summary: 'Petstore sheds load',
      description:
        '{{ $labels.instance }} ({{ $labels.job }}) has answered {{ $value | humanizePercentage }} of its requests 503 for 10 minutes because its event loop was behind: it has more work than it can do.',
    },
    {
      alert: 'PetstoreCommitsSlow',
      expr: `histogram_quantile(0.99, sum by (job, instance, le) (rate(petstore_store_commit_duration_seconds_bucket{${SELECTOR}}[5m])))\n> ${t.commitP99Seconds}`,
      for: '10m',
      severity: 'warning',
      summary: 'Petstore’s creates commit slowly',
      description:
        'The slowest commits of {{ $labels.instance }} ({{ $labels.job }}) (p99) took {{ $value | humanizeDuration }} for 10 minutes: the disk (fsync) or the database is slow, and every create waits for it.',
    },
    {
      alert: 'PetstoreRestarting',
      expr: `changes(process_start_time_seconds{${SELECTOR}}[1h]) > ${t.restartsPerHour}`,
      for: '0s',
      severity: 'warning',
      summary: 'Petstore restarts again and again',
      description:
        '{{ $labels.instance }} ({{ $labels.job }}) started {{ $value }} times within an hour: it crashes, runs out of memory, or fails its liveness probe.',
    },
  ]
}

function causeAlert(cause: Cause): AlertingRule {
  return {
    alert: cause.alert,
    expr: cause.expr,
    ...(cause.for === '0s' ? {} : { for: cause.for }),
    labels: { severity: cause.severity },
    annotations: {
      summary: cause.summary,
      description: cause.description,
      runbook_url: runbook(cause.alert),
    },
  }
}

function scaleRule(rule: Rule, timeScale: number): Rule {
  const expr = scaleRanges(rule.expr, timeScale)
  if ('record' in rule) return { ...rule, expr }
  return { ...rule, expr, ...(rule.for === undefined ? {} : { for: scale(rule.for, timeScale) }) }
}

export function buildRules({ timeScale = 1 }: RuleOptions = {}): RuleFile {
  const groups: RuleGroup[] = [
    // One group: its rules run in order at each evaluation, so the alerts read the ratios of the
    // same instant (groups run apart, and an alert in another group reads them an interval late).
    { name: 'petstore-slo', rules: [...recordingRules(), ...OBJECTIVES.flatMap(burnAlerts)] },
    { name: 'petstore-cause-alerts', rules: causes().map(causeAlert) },
  ]
  return {
    groups: groups.map((group) => ({
      ...group,
      rules: group.rules.map((rule) => scaleRule(rule, timeScale)),
    })),
  }
}

/** Every alerting rule of a rule file. */
export function alertsOf(file: RuleFile): AlertingRule[] {
  return file.groups.flatMap((group) => group.rules.filter((rule) => 'alert' in rule))
}
