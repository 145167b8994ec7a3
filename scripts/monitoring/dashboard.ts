// The Grafana dashboard of deploy/monitoring/petstore.dashboard.json (D31), built on the types of
// Grafana's dashboard schema (@grafana/schema, generated from its CUE schema), so that a field
// Grafana does not know fails the type-check. The rows: the objectives and their budgets, RED per
// operation, saturation, limits, the store. Every query is one test/monitoring-prometheus.test.ts
// runs against a real Prometheus scraping the service under load, and which must return data.
import type { Dashboard, DataSourceRef, Panel, RowPanel } from '@grafana/schema'
import { errorRatio, OBJECTIVE } from './rules.ts'
import { API_ROUTES, BUDGET_PERIOD, OBJECTIVES, SELECTOR } from './settings.ts'

/** The Prometheus data source, chosen in the dashboard's variable. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, not a template.
const DATASOURCE: DataSourceRef = { type: 'prometheus', uid: '${datasource}' }
/** The service's series on the instances picked in the dashboard. */
const SERIES = `${SELECTOR},instance=~"$instance"`
const API = `${SERIES},http_route=~"${API_ROUTES}"`
const DURATION = 'http_server_request_duration_seconds'
const RATE = '$__rate_interval'

export interface Query {
  expr: string
  legendFormat: string
}

type Kind = 'timeseries' | 'stat'

interface PanelSpec {
  title: string
  description: string
  kind?: Kind
  unit: string
  queries: Query[]
  /** Columns of 24. */
  width?: number
}

interface RowSpec {
  title: string
  panels: PanelSpec[]
}

const q = (expr: string, legendFormat = ''): Query => ({ expr, legendFormat })
const capitalised = (word: string) => word.charAt(0).toUpperCase() + word.slice(1)
const rate = (metric: string, matchers = SERIES) => `rate(${metric}{${matchers}}[${RATE}])`

function objectives(): PanelSpec[] {
  const stats = OBJECTIVES.flatMap(({ slo, objective }): PanelSpec[] => [
    {
      title: `${capitalised(slo)} over ${BUDGET_PERIOD} (objective ${objective * 100} %)`,
      description: `The share of the API's requests that were good over the budget period (bad: ${OBJECTIVES.find((o) => o.slo === slo)?.bad}).`,
      kind: 'stat',
      unit: 'percentunit',
      queries: [q(`1 - ${errorRatio(BUDGET_PERIOD)}{slo="${slo}"}`, '{{job}}')],
      width: 6,
    },
    {
      title: `${capitalised(slo)}: error budget left`,
      description: `The part of the ${BUDGET_PERIOD} error budget not spent; below 0 the objective is missed.`,
      kind: 'stat',
      unit: 'percentunit',
      queries: [
        q(
          `1 - ${errorRatio(BUDGET_PERIOD)}{slo="${slo}"} / on (slo) group_left () (1 - ${OBJECTIVE}{slo="${slo}"})`,
          '{{job}}',
        ),
      ],
      width: 6,
    },
  ])
  return [
    ...stats,
    {
      title: 'Burn rate (1 h and 5 min)',
      description:
        'How many times faster than the period allows each budget is being spent: 1 spends it exactly in the period; the fast alert pages at 14.4 over both windows.',
      unit: 'none',
      queries: ['1h', '5m'].map((window) =>
        q(`${errorRatio(window)} / on (slo) group_left () (1 - ${OBJECTIVE})`, `{{slo}} ${window}`),
      ),
      width: 24,
    },
  ]
}

const BY_OPERATION = 'http_request_method, http_route'

function red(): PanelSpec[] {
  const quantile = (p: number) =>
    q(
      `histogram_quantile(${p}, sum by (le, ${BY_OPERATION}) (${rate(`${DURATION}_bucket`, API)}))`,
      `p${p * 100} {{http_request_method}} {{http_route}}`,
    )
  return [
    {
      title: 'Requests per operation',
      description: 'Answers a second, by method and route (listPets, createPet, getPet).',
      unit: 'reqps',
      queries: [
        q(
          `sum by (${BY_OPERATION}) (${rate(`${DURATION}_count`, API)})`,
          '{{http_request_method}} {{http_route}}',
        ),
      ],
      width: 8,
    },
    {
      title: 'Errors per operation, by status',
      description: 'Answers other than 2xx a second (4xx are the clients’, 5xx the service’s).',
      unit: 'reqps',
      queries: [
        q(
          `sum by (${BY_OPERATION}, http_response_status_code) (${rate(`${DURATION}_count`, `${API},http_response_status_code!~"2.."`)})`,
          '{{http_response_status_code}} {{http_request_method}} {{http_route}}',
        ),
      ],
      width: 8,
    },
    {
      title: 'Duration per operation (p50, p95, p99)',
      description: 'From the request to the last byte of the answer.',
      unit: 's',
      queries: [quantile(0.5), quantile(0.95), quantile(0.99)],
      width: 8,
    },
  ]
}

function saturation(): PanelSpec[] {
  return [
    {
      title: 'Event loop lag',
      description:
        'How far the event loop is behind (p50, p99); past 200 ms the service sheds load.',
      unit: 's',
      queries: [
        q(`nodejs_eventloop_lag_p50_seconds{${SERIES}}`, 'p50 {{instance}}'),
        q(`nodejs_eventloop_lag_p99_seconds{${SERIES}}`, 'p99 {{instance}}'),
      ],
      width: 6,
    },
    {
      title: 'Memory',
      description: 'Resident memory and the container’s limit (0: none); heap used and V8’s limit.',
      unit: 'bytes',
      queries: [
        q(`process_resident_memory_bytes{${SERIES}}`, 'resident {{instance}}'),
        q(`petstore_memory_limit_bytes{${SERIES}}`, 'limit {{instance}}'),
        q(`nodejs_heap_size_used_bytes{${SERIES}}`, 'heap used {{instance}}'),
        q(`petstore_heap_size_limit_bytes{${SERIES}}`, 'heap limit {{instance}}'),
      ],
      width: 6,
    },
    {
      title: 'Database pool (PostgreSQL)',
      description: 'Connections in use and idle, and queries waiting for one.',
      unit: 'short',
      queries: [
        q(`petstore_db_pool_connections_in_use{${SERIES}}`, 'in use {{instance}}'),
        q(`petstore_db_pool_connections_idle{${SERIES}}`, 'idle {{instance}}'),
        q(`petstore_db_pool_requests_waiting{${SERIES}}`, 'waiting {{instance}}'),
      ],
      width: 6,
    },
    {
      title: 'Connections and shedding',
      description: 'Open handles (sockets among them), and requests shed with 503 a second.',
      unit: 'short',
      queries: [
        q(`nodejs_active_handles_total{${SERIES}}`, 'handles {{instance}}'),
        q(`${rate('petstore_load_shed_total')}`, 'shed/s {{instance}}'),
      ],
      width: 6,
    },
  ]
}

function limits(): PanelSpec[] {
  return [
    {
      title: 'Refused 429',
      description:
        'Requests over their key’s rate limit, and from addresses past their failed authentications.',
      unit: 'reqps',
      queries: [
        q(`sum by (instance) (${rate('petstore_rate_limited_total')})`, 'rate limit {{instance}}'),
        q(
          `sum by (instance) (${rate('petstore_auth_failure_limited_total')})`,
          'failed authentications {{instance}}',
        ),
      ],
      width: 8,
    },
    {
      title: 'API keys looked up in the store',
      description: 'By result: a climbing `unknown` is someone trying keys.',
      unit: 'ops',
      queries: [q(`sum by (result) (${rate('petstore_api_key_lookups_total')})`, '{{result}}')],
      width: 8,
    },
    {
      title: 'Limits failing open (Redis)',
      description: '1 while Redis fails and the limit lets requests through uncounted.',
      unit: 'short',
      queries: [
        q(`petstore_rate_limit_fail_open{${SERIES}}`, 'rate limit {{instance}}'),
        q(
          `petstore_auth_failure_counter_fail_open{${SERIES}}`,
          'failed authentications {{instance}}',
        ),
      ],
      width: 8,
    },
  ]
}

function store(): PanelSpec[] {
  return [
    {
      title: 'Pets created and commits',
      description:
        'Pets durably committed a second, the transactions that did it, and replays of an Idempotency-Key.',
      unit: 'ops',
      queries: [
        q(`sum by (instance) (${rate('petstore_pets_created_total')})`, 'pets {{instance}}'),
        q(
          `sum by (instance) (${rate('petstore_store_commit_duration_seconds_count')})`,
          'commits {{instance}}',
        ),
        q(
          `sum by (instance) (${rate('petstore_idempotent_replays_total')})`,
          'replays {{instance}}',
        ),
      ],
      width: 6,
    },
    {
      title: 'Commit duration (p99)',
      description:
        'The slowest commits: an fsync (SQLite) or a COMMIT (PostgreSQL) each create waits for.',
      unit: 's',
      queries: [
        q(
          `histogram_quantile(0.99, sum by (le, instance) (${rate('petstore_store_commit_duration_seconds_bucket')}))`,
          'p99 {{instance}}',
        ),
      ],
      width: 6,
    },
    {
      title: 'Pets per commit',
      description: 'Creates committed together (SQLite’s group commit; 1 on PostgreSQL).',
      unit: 'short',
      queries: [
        q(
          `sum by (instance) (${rate('petstore_store_commit_batch_size_sum')}) / sum by (instance) (${rate('petstore_store_commit_batch_size_count')})`,
          '{{instance}}',
        ),
      ],
      width: 6,
    },
    {
      title: 'Database and readiness',
      description:
        'Unavailable: 1 while the database fails. Ready: 1 while /readyz would answer 200.',
      unit: 'short',
      queries: [
        q(`petstore_store_unavailable{${SERIES}}`, 'unavailable {{instance}}'),
        q(`petstore_ready{${SERIES}}`, 'ready {{instance}}'),
        q(`up{${SERIES}}`, 'up {{instance}}'),
      ],
      width: 6,
    },
  ]
}

const ROWS: RowSpec[] = [
  { title: 'Objectives and error budgets', panels: objectives() },
  { title: 'Requests, errors and durations per operation', panels: red() },
  { title: 'Saturation', panels: saturation() },
  { title: 'Limits', panels: limits() },
  { title: 'Store', panels: store() },
]

const HEIGHT = 8

function panel(spec: PanelSpec, id: number, x: number, y: number): Panel {
  const width = spec.width ?? 12
  return {
    id,
    type: spec.kind ?? 'timeseries',
    title: spec.title,
    description: spec.description,
    datasource: DATASOURCE,
    gridPos: { x, y, w: width, h: HEIGHT },
    fieldConfig: { defaults: { unit: spec.unit }, overrides: [] },
    options: {},
    targets: spec.queries.map((query, i) => ({
      datasource: DATASOURCE,
      refId: String.fromCharCode(65 + i),
      expr: query.expr,
      legendFormat: query.legendFormat,
    })),
  }
}

/** Rows, each then its panels left to right, wrapping at 24 columns. */
function layout(): Array<Panel | RowPanel> {
  const panels: Array<Panel | RowPanel> = []
  let id = 1
  let y = 0
  for (const row of ROWS) {
    panels.push({
      id: id++,
      type: 'row',
      title: row.title,
      collapsed: false,
      gridPos: { x: 0, y, w: 24, h: 1 },
      panels: [],
    })
    y += 1
    let x = 0
    for (const spec of row.panels) {
      const width = spec.width ?? 12
      if (x + width > 24) {
        x = 0
        y += HEIGHT
      }
      panels.push(panel(spec, id++, x, y))
      x += width
    }
    y += HEIGHT
  }
  return panels
}

export function buildDashboard(): Dashboard {
  return {
    uid: 'petstore',
    title: 'Petstore',
    description:
      'Objectives, RED per operation, saturation, limits and the store (docs/operations.md, Alerts).',
    tags: ['petstore'],
    editable: true,
    schemaVersion: 39,
    refresh: '30s',
    time: { from: 'now-6h', to: 'now' },
    timezone: 'utc',
    graphTooltip: 1,
    templating: {
      list: [
        {
          name: 'datasource',
          label: 'Prometheus',
          type: 'datasource',
          query: 'prometheus',
        },
        {
          name: 'instance',
          label: 'Instance',
          type: 'query',
          datasource: DATASOURCE,
          query: `label_values(up{${SELECTOR}}, instance)`,
          refresh: 2,
          includeAll: true,
          multi: true,
          allValue: '.*',
        },
      ],
    },
    panels: layout(),
  }
}

/** Every query of every panel, with its panel's title. */
export function queriesOf(dashboard: Dashboard): { panel: string; expr: string }[] {
  return (dashboard.panels ?? []).flatMap((p) =>
    'targets' in p && Array.isArray(p.targets)
      ? p.targets.map((target) => ({
          panel: p.title ?? '',
          expr: String((target as { expr?: unknown }).expr ?? ''),
        }))
      : [],
  )
}
