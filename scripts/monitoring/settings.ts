// What an operator tunes in the alerts and the dashboard (D31), in one place: which targets are
// the service, the objectives, the thresholds of the cause alerts, where the runbooks are. Change
// a value here and run `npm run monitoring`, which writes deploy/monitoring/ and the Kubernetes
// component from it (docs/operations.md, Alerts).

/** The PromQL matcher that selects the service's targets; the PodMonitor sets this job. */
export const JOB = 'petstore'
export const SELECTOR = `job="${JOB}"`

/**
 * Where each alert's runbook_url points: docs/operations.md, one heading per alert. Relative to
 * the repository by default; set it to where your copy is served (a Git host's page of the file)
 * so that a notification's link opens it.
 */
export const RUNBOOK_BASE = 'docs/operations.md'

/**
 * The operations the objectives cover, by route template: listPets, createPet and getPet (not the
 * probes, the OpenAPI document, the docs page, or paths no route matches).
 */
export const API_ROUTES = '/v1/pets.*'

export interface Objective {
  /** The `slo` label of its recording rules and alerts. */
  slo: 'availability' | 'latency'
  /** The share of good requests over BUDGET_PERIOD, e.g. 0.999. */
  objective: number
  /** What a bad request is, for the alerts' descriptions. */
  bad: string
}

/** A bucket bound of http_server_request_duration_seconds (metrics.ts): le="0.25". */
export const LATENCY_THRESHOLD_SECONDS = '0.25'

/**
 * Availability: answers of the API that are not 5xx. 503s from load shedding and from a failing
 * database count against it (the client got no answer it could use). 429s count neither way:
 * they are left out of the ratio, since a client past its own budget must not spend everyone's,
 * nor, by flooding, dilute the errors others get until an outage no longer shows. Other 4xx are
 * good answers (a 404 for an unknown pet is the right one).
 * Latency: answers that are neither 5xx nor 429, finished within LATENCY_THRESHOLD_SECONDS (a 5xx
 * is availability's; a quick 503 or 429 must not make latency look better).
 */
export const OBJECTIVES: readonly Objective[] = [
  { slo: 'availability', objective: 0.999, bad: 'answered with a 5xx' },
  {
    slo: 'latency',
    objective: 0.99,
    bad: `slower than ${Number(LATENCY_THRESHOLD_SECONDS) * 1000} ms`,
  },
]

/** The error budget's period: the dashboard's remaining budget is over it. */
export const BUDGET_PERIOD = '30d'

/**
 * The SRE Workbook's multiwindow, multi-burn-rate alerts (chapter 5, "Alerting on SLOs"): each
 * pair fires when both its long and its short window burn the budget `factor` times faster than
 * it lasts the period; the short window makes it end soon after the burn does.
 */
export const BURN_WINDOWS = {
  page: [
    { long: '1h', short: '5m', factor: 14.4 },
    { long: '6h', short: '30m', factor: 6 },
  ],
  ticket: [
    { long: '1d', short: '2h', factor: 3 },
    { long: '3d', short: '6h', factor: 1 },
  ],
} as const

/** The cause alerts' thresholds. */
export const THRESHOLDS = {
  /** PETSTORE_MAX_EVENT_LOOP_DELAY_MS' default: past it the service sheds load. */
  eventLoopLagSeconds: 0.2,
  /** Resident memory over the container's limit, heap over V8's. */
  memoryShare: 0.9,
  /** Failed authentications a second (401s, or 429s to addresses past their limit). */
  failedAuthenticationsPerSecond: 1,
  /** Requests shed, as a share of all answered. */
  shedShare: 0.01,
  /** Slowest commits (p99), seconds: an fsync or a PostgreSQL COMMIT that slow is a disk in trouble. */
  commitP99Seconds: 0.5,
  /** Starts of one instance within an hour. */
  restartsPerHour: 3,
} as const
