// D31: the alerts and the dashboard of deploy/monitoring/, as an operator gets them. The files
// are what `npm run monitoring` writes (no drift); `promtool check rules` finds nothing wrong;
// `promtool test rules` passes petstore.rules.test.yaml, which tests every alert as firing when
// it should, and silent on a healthy series and on a blip; every runbook is a heading of
// docs/operations.md; the dashboard is whole (ids, layout, a query in every panel). Where the
// rules and dashboard meet a real service and a real Prometheus: monitoring-prometheus.test.ts.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { promisify } from 'node:util'
import type { Panel, RowPanel } from '@grafana/schema'
import { parse } from 'yaml'
import { buildDashboard, queriesOf } from '../scripts/monitoring/dashboard.ts'
import { DASHBOARD_FILE, monitoringFiles, ROOT, RULES_FILE } from '../scripts/monitoring/files.ts'
import { alertsOf, buildRules, durationMs } from '../scripts/monitoring/rules.ts'
import { promtool } from './helpers/prometheus-server.ts'
import { metricNames } from './helpers/promql.ts'

const run = promisify(execFile)
const TESTS_FILE = 'deploy/monitoring/petstore.rules.test.yaml'
const skip = promtool.skipReason() ?? false
if (skip) console.log(skip)

/** promtool's output, or its failure with that output. */
async function promtoolSays(...args: string[]): Promise<string> {
  const binary = promtool.binary() as string
  const { stdout, stderr } = await run(binary, args, { cwd: ROOT }).catch((err: unknown) => {
    const { stdout = '', stderr = '' } = err as { stdout?: string; stderr?: string }
    throw new Error(`promtool ${args.join(' ')} failed:\n${stdout}${stderr}`)
  })
  return stdout + stderr
}

describe('deploy/monitoring: the rule file (D31)', () => {
  it('is what npm run monitoring writes, as are the dashboard and the Kubernetes component', () => {
    for (const [path, text] of monitoringFiles()) {
      assert.equal(
        readFileSync(join(ROOT, path), 'utf8'),
        text,
        `${path} is stale: run npm run monitoring and commit it`,
      )
    }
  })

  it('passes promtool check rules', { skip }, async () => {
    const output = await promtoolSays('check', 'rules', RULES_FILE)
    assert.match(output, /SUCCESS: \d+ rules found/)
    assert.doesNotMatch(output, /WARNING/)
  })

  it('passes promtool test rules: every alert fires when it should, and not on a healthy series or a blip', {
    skip,
  }, async () => {
    assert.match(await promtoolSays('test', 'rules', TESTS_FILE), /SUCCESS/)
  })

  it('tests every alert: firing on `failing`, silent on `healthy` and on `blip`', () => {
    interface TestGroup {
      input_series: { series: string }[]
      alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[]
    }
    const { tests } = parse(readFileSync(join(ROOT, TESTS_FILE), 'utf8')) as { tests: TestGroup[] }
    const missing: string[] = []
    for (const { alert } of alertsOf(buildRules())) {
      const groups = tests.filter((group) =>
        group.alert_rule_test?.some((test) => test.alertname === alert),
      )
      const evals = groups.flatMap((group) =>
        (group.alert_rule_test ?? []).filter((test) => test.alertname === alert),
      )
      const cases = new Set(
        groups.flatMap((group) =>
          group.input_series.map((input) => /instance="([^"]+)"/.exec(input.series)?.[1]),
        ),
      )
      if (!evals.some((test) => (test.exp_alerts ?? []).length > 0))
        missing.push(`${alert}: firing`)
      if (!evals.some((test) => (test.exp_alerts ?? []).length === 0))
        missing.push(`${alert}: silent`)
      for (const instance of ['failing', 'healthy', 'blip']) {
        if (!cases.has(instance)) missing.push(`${alert}: no ${instance} series`)
      }
    }
    assert.deepEqual(missing, [])
  })

  it('labels every alert with a severity and annotates it with a summary, a description saying where, and a runbook', () => {
    // That each runbook is a heading of docs/operations.md: docs-links.test.ts.
    for (const rule of alertsOf(parse(readFileSync(join(ROOT, RULES_FILE), 'utf8')))) {
      assert.ok(['critical', 'warning'].includes(rule.labels.severity), rule.alert)
      assert.ok(rule.annotations.summary.length > 0, `${rule.alert}: summary`)
      assert.match(
        rule.annotations.description,
        /\{\{ \$labels\.(job|instance) \}\}/,
        `${rule.alert}: says where`,
      )
      assert.equal(
        rule.annotations.runbook_url,
        `docs/operations.md#${rule.alert.toLowerCase()}`,
        rule.alert,
      )
    }
  })

  it('pages only on the SRE Workbook’s fast windows; a rehearsal scales every window and `for` alike', () => {
    const rules = buildRules()
    const scaled = buildRules({ timeScale: 60 })
    const critical = alertsOf(rules).filter((rule) => rule.labels.severity === 'critical')
    assert.deepEqual(critical.map((rule) => rule.alert).sort(), [
      'PetstoreAvailabilityBudgetBurnFast',
      'PetstoreDown',
      'PetstoreLatencyBudgetBurnFast',
      'PetstoreStoreUnavailable',
    ])
    const fast = alertsOf(rules).find((rule) => rule.alert === 'PetstoreAvailabilityBudgetBurnFast')
    assert.match(
      fast?.expr ?? '',
      /rate1h\{.*14\.4 \*[\s\S]*rate5m\{.*14\.4 \*[\s\S]*rate6h\{.*6 \*[\s\S]*rate30m\{.*6 \*/,
    )
    // Same rules, same names; each range and `for` 60 times shorter.
    const ranges = (expr: string) =>
      [...expr.matchAll(/\[([^\]]+)\]/g)].map(([, range]) => durationMs(range as string))
    rules.groups.forEach((group, g) => {
      group.rules.forEach((rule, r) => {
        const other = scaled.groups[g]?.rules[r]
        assert.ok(other)
        assert.deepEqual(
          ranges(other.expr),
          ranges(rule.expr).map((ms) => ms / 60),
        )
        if ('alert' in rule && 'alert' in other && rule.for !== undefined) {
          assert.equal(durationMs(other.for ?? ''), durationMs(rule.for) / 60)
        }
      })
    })
  })
})

describe('deploy/monitoring: the dashboard (D31)', () => {
  const dashboard = buildDashboard()
  const panels = dashboard.panels ?? []
  const written = JSON.parse(readFileSync(join(ROOT, DASHBOARD_FILE), 'utf8')) as typeof dashboard

  it('has rows for the objectives, RED per operation, saturation, limits and the store', () => {
    assert.deepEqual(written, dashboard)
    const rows = panels.filter((p): p is RowPanel => p.type === 'row').map((p) => p.title)
    assert.deepEqual(rows, [
      'Objectives and error budgets',
      'Requests, errors and durations per operation',
      'Saturation',
      'Limits',
      'Store',
    ])
  })

  it('gives each panel an id of its own, a place on the 24-column grid that no other takes, and Prometheus queries', () => {
    const ids = panels.map((p) => p.id)
    assert.equal(new Set(ids).size, ids.length, 'unique ids')
    const cells = new Set<string>()
    for (const p of panels) {
      const { x = 0, y = 0, w = 0, h = 0 } = p.gridPos ?? {}
      assert.ok(w > 0 && h > 0 && x >= 0 && x + w <= 24, `${p.title}: on the grid`)
      for (let i = x; i < x + w; i++) {
        for (let j = y; j < y + h; j++) {
          assert.ok(!cells.has(`${i},${j}`), `${p.title}: overlaps another panel`)
          cells.add(`${i},${j}`)
        }
      }
      if (p.type === 'row') continue
      const panel = p as Panel
      assert.equal(panel.datasource?.type, 'prometheus', `${p.title}: Prometheus`)
      const targets = panel.targets ?? []
      assert.ok(targets.length > 0, `${p.title}: a query`)
      assert.equal(new Set(targets.map((t) => t.refId)).size, targets.length, `${p.title}: refIds`)
    }
    for (const { panel, expr } of queriesOf(dashboard)) {
      assert.ok(metricNames(expr).length > 0, `${panel}: reads a metric`)
    }
  })
})

describe('helpers/promql.ts reads the metric names of an expression', () => {
  it('names, not functions, label names, keywords, numbers or ranges', () => {
    const expr = `sum by (job, le) (rate(a_bucket{job="x",le="0.25"}[5m])) / on (slo) group_left () (1 - b:c:ratio{slo="y"}) > 1e3 and histogram_quantile(0.99, c_total offset 5m) or vector(0.5) unless d`
    assert.deepEqual(metricNames(expr), ['a_bucket', 'b:c:ratio', 'c_total', 'd'])
    assert.deepEqual(metricNames('rate(x{instance=~"$instance"}[$__rate_interval])'), ['x'])
  })
})
