// D31: the rules and the dashboard on a real Prometheus scraping real services through a real
// fault. Two `petstore serve` processes, one on a SQLite file on a small tmpfs and, where
// PostgreSQL is reachable, one on PostgreSQL (for the pool's figures), scraped every second by
// Prometheus with deploy/monitoring's rules as `npm run monitoring -- --time-scale 120` writes them
// (every window and `for` 120 times shorter: the documented rehearsal, docs/operations.md, Alerts).
//
// Under a steady load of good traffic no alert is pending or firing; every metric name the rules
// and the dashboard read is in a real scrape of the services; every panel's query returns data.
// Then the tmpfs is filled: the SQLite file cannot be written, and PetstoreStoreUnavailable and
// PetstoreAvailabilityBudgetBurnFast fire, read from /api/v1/alerts; the space is freed, and
// both resolve.
//
// Root only (it mounts a tmpfs), and with Debian's prometheus; elsewhere skipped with a line.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { buildDashboard, queriesOf } from '../scripts/monitoring/dashboard.ts'
import { rulesYaml } from '../scripts/monitoring/files.ts'
import { alertsOf, buildRules } from '../scripts/monitoring/rules.ts'
import { JOB } from '../scripts/monitoring/settings.ts'
import { generateApiKey } from '../src/contract/api-key.ts'
import { freePort } from './helpers/free-port.ts'
import { fillDisk } from './helpers/full-disk.ts'
import { createTestDatabase, postgresSkipReason, type TestDatabase } from './helpers/postgres.ts'
import { type ServiceProcess, startService } from './helpers/process.ts'
import { parseExposition } from './helpers/prometheus.ts'
import {
  type Alert,
  type PrometheusServer,
  prometheusProgram,
  startPrometheus,
} from './helpers/prometheus-server.ts'
import { metricNames } from './helpers/promql.ts'
import { tempDir } from './helpers/server.ts'

/**
 * The rehearsal's factor: 1 h of the rules is 30 s here, 5 min 2.5 s (two or three scrapes), and
 * the page's 30 min window, which holds the alert after a burn ends, 15 s.
 */
const TIME_SCALE = 120
/** Grafana's $__rate_interval for a 1 s scrape: four scrapes. */
const RATE_INTERVAL = '4s'
const STORE_ALERT = 'PetstoreStoreUnavailable'
const BURN_ALERT = 'PetstoreAvailabilityBudgetBurnFast'

const dir = await tempDir()
let skip: string | false = prometheusProgram.skipReason() ?? false
if (!skip) {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', dir.path], { stdio: 'pipe' })
  } catch {
    skip = 'cannot mount a tmpfs here (needs root): the tests on a real Prometheus are skipped'
  }
}
if (skip) {
  console.log(skip)
  await dir.remove()
}
/** PostgreSQL's instance is there when PostgreSQL is (required in CI). */
const withPostgres = !skip && (await postgresSkipReason()) === undefined

/** Every name a rule or a panel reads that the service must export (not its own records). */
function namesRead(): Map<string, string> {
  const readers = new Map<string, string>()
  for (const group of buildRules().groups) {
    for (const rule of group.rules) {
      const reader = 'alert' in rule ? rule.alert : rule.record
      for (const name of metricNames(rule.expr)) readers.set(name, reader)
    }
  }
  for (const { panel, expr } of queriesOf(buildDashboard())) {
    for (const name of metricNames(expr)) readers.set(name, `panel "${panel}"`)
  }
  // Recorded by the rules themselves, and Prometheus' own per target.
  for (const name of readers.keys()) {
    if (name.includes(':') || name === 'up') readers.delete(name)
  }
  return readers
}

/** A panel's query as Grafana sends it with every instance picked. */
function asGrafanaSends(expr: string): string {
  return expr.replaceAll('$__rate_interval', RATE_INTERVAL).replaceAll('$instance', '.*')
}

describe('the rules and the dashboard on a real Prometheus scraping the service (D31)', {
  skip,
}, () => {
  const key = `monitoring-test-${randomBytes(16).toString('hex')}`
  const filler = join(dir.path, 'filler')
  const services: ServiceProcess[] = []
  const metricsUrls: string[] = []
  let database: TestDatabase | undefined
  let prometheus: PrometheusServer
  /** host:port of the SQLite service's metrics: its `instance` label. */
  let sqliteTarget = ''
  let loading = true
  let load: Promise<void>
  const seen = new Map<number, number>()

  async function start(databaseUrl: string, extra: Record<string, string> = {}) {
    const port = await freePort()
    services.push(
      await startService({
        DATABASE_URL: databaseUrl,
        PETSTORE_API_KEYS: key,
        PETSTORE_RATE_LIMIT: '0',
        METRICS_PORT: String(port),
        ...extra,
      }),
    )
    metricsUrls.push(`http://127.0.0.1:${port}/metrics`)
    return `127.0.0.1:${port}`
  }

  /**
   * Good traffic on one service, about 25 requests a second a worker: lists, creates, gets, and
   * the 404s clients make. Worker 0 first sends a key of ours that was never made (a 401, and the
   * store asked about it): one, not a flood, which would turn the address away (429).
   */
  async function client(url: string, worker: number) {
    const auth = { authorization: `Bearer ${key}` }
    if (worker === 0) {
      const unknown = { authorization: `Bearer ${generateApiKey('production')}` }
      const refused = await fetch(`${url}/v1/pets`, { headers: unknown })
      assert.equal(refused.status, 401)
      await refused.arrayBuffer()
    }
    const calls: [string, RequestInit][] = [
      ['/v1/pets?limit=5', { headers: auth }],
      [
        '/v1/pets',
        {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ name: `pet ${worker}`, categoryId: 1 }),
        },
      ],
      ['/v1/pets/1', { headers: auth }],
      ['/v1/pets/999999999', { headers: auth }],
    ]
    for (let i = 0; loading; i++) {
      const [path, init] = calls[i % calls.length] as [string, RequestInit]
      const response = await fetch(url + path, init).catch(() => undefined)
      if (response !== undefined) {
        seen.set(response.status, (seen.get(response.status) ?? 0) + 1)
        await response.arrayBuffer()
      }
      await sleep(40)
    }
  }

  const firing = (alerts: Alert[], name: string) =>
    alerts.filter((alert) => alert.labels.alertname === name && alert.state === 'firing')

  /** Polls /api/v1/alerts until `done` holds; the seconds it took. */
  async function until(done: (alerts: Alert[]) => boolean, what: string, ms = 40_000) {
    const started = performance.now()
    let alerts: Alert[] = []
    while (performance.now() - started < ms) {
      alerts = await prometheus.alerts()
      if (done(alerts)) return (performance.now() - started) / 1000
      await sleep(250)
    }
    throw new Error(
      `${what} not within ${ms / 1000} s; alerts: ${JSON.stringify(alerts)}\n${prometheus.log()}`,
    )
  }

  before(async () => {
    sqliteTarget = await start(`sqlite:${join(dir.path, 'petstore.db')}`)
    const targets = [sqliteTarget]
    if (withPostgres) {
      database = await createTestDatabase()
      targets.push(await start(database.url, { DATABASE_POOLER: database.pooler }))
    }
    prometheus = await startPrometheus({
      job: JOB,
      targets,
      rules: rulesYaml(buildRules({ timeScale: TIME_SCALE })),
    })
    load = Promise.all(
      services.flatMap((service) => [0, 1].map((worker) => client(service.url, worker))),
    ).then(() => {})
  })

  after(async () => {
    loading = false
    await load
    await prometheus?.stop()
    await Promise.all(services.map((service) => service.stop()))
    await database?.drop()
    rmSync(filler, { force: true })
    execFileSync('umount', [dir.path])
    await dir.remove()
  })

  it('under a steady load of good traffic, no alert fires', async () => {
    // Until the 5 min window (2.5 s) has its ratios, then for as long as the longest `for` of an
    // alert whose condition a busy machine could meet (10 min, 5 s here): none fires.
    const deadline = Date.now() + 30_000
    while ((await prometheus.query('petstore:slo_error_ratio:rate5m')).length < 2) {
      assert.ok(Date.now() < deadline, `no SLI recorded:\n${prometheus.log()}`)
      await sleep(250)
    }
    const quiet = Date.now() + 6_000
    while (Date.now() < quiet) {
      const alerts = await prometheus.alerts()
      assert.deepEqual(
        alerts.filter((alert) => alert.state === 'firing'),
        [],
        'an alert fired under good traffic',
      )
      // The two the fault below must fire are not even pending.
      assert.deepEqual(
        alerts.filter((alert) => [STORE_ALERT, BURN_ALERT].includes(alert.labels.alertname ?? '')),
        [],
      )
      await sleep(500)
    }
    assert.ok((seen.get(201) ?? 0) > 20 && (seen.get(200) ?? 0) > 20, JSON.stringify([...seen]))
    assert.equal(seen.get(500) ?? 0, 0)
    assert.equal(seen.get(503) ?? 0, 0)
  })

  it('every metric name a rule or a panel reads is in a scrape of the running services', async () => {
    const exported = new Set<string>()
    for (const url of metricsUrls) {
      const families = parseExposition(await (await fetch(url)).text())
      for (const family of families.values()) {
        exported.add(family.name)
        for (const sample of family.samples) exported.add(sample.name)
      }
    }
    // The pool's gauges exist on PostgreSQL only: checked where it runs (always in CI).
    const unknown = [...namesRead()].filter(
      ([name]) => !exported.has(name) && (withPostgres || !name.startsWith('petstore_db_pool_')),
    )
    assert.deepEqual(
      unknown.map(([name, reader]) => `${name} (${reader})`),
      [],
    )
    assert.ok(namesRead().size >= 15, 'the names were read')
  })

  it('every panel of the dashboard has data', async () => {
    const empty: string[] = []
    for (const { panel, expr } of queriesOf(buildDashboard())) {
      if (!withPostgres && expr.includes('petstore_db_pool_')) continue
      // Data a graph can draw: a series with a number (a quantile of nothing is NaN).
      const result = await prometheus.query(asGrafanaSends(expr))
      if (!result.some((series) => Number.isFinite(Number(series.value[1])))) {
        empty.push(`${panel}: ${expr} → ${JSON.stringify(result)}`)
      }
    }
    assert.deepEqual(empty, [])
  })

  it('the SQLite disk fills: the store alert and the availability burn-rate alert fire', async () => {
    fillDisk(filler)
    // Within their `for` (scaled: 0.5 s and 1 s) and a few scrape and evaluation intervals of
    // 1 s each, with room for a busy machine: the shipped rules take a minute and two.
    const storeAfter = await until(
      (alerts) => firing(alerts, STORE_ALERT).length > 0,
      `${STORE_ALERT} firing`,
      15_000,
    )
    const burnAfter = await until(
      (alerts) => firing(alerts, BURN_ALERT).length > 0,
      `${BURN_ALERT} firing`,
      15_000,
    )
    const alerts = await prometheus.alerts()
    const store = firing(alerts, STORE_ALERT)
    assert.equal(store.length, 1, 'the SQLite instance only')
    assert.equal(store[0]?.labels.instance, sqliteTarget)
    assert.equal(store[0]?.labels.severity, 'critical')
    assert.equal(firing(alerts, BURN_ALERT)[0]?.labels.severity, 'critical')
    assert.ok((seen.get(503) ?? 0) > 0, 'the service answered 503')
    // The figures behind them, as Prometheus has them.
    const value = async (expr: string) => (await prometheus.query(expr))[0]?.value[1]
    assert.equal(await value(`petstore_store_unavailable{instance="${sqliteTarget}"}`), '1')
    assert.equal(await value(`petstore_ready{instance="${sqliteTarget}"}`), '0')
    console.log(
      `store alert firing ${storeAfter.toFixed(1)} s after the disk filled, burn-rate alert ${burnAfter.toFixed(1)} s after that`,
    )
  })

  it('the space is freed: both alerts resolve', async () => {
    rmSync(filler)
    const resolvedAfter = await until(
      (alerts) =>
        alerts.every((alert) => ![STORE_ALERT, BURN_ALERT].includes(alert.labels.alertname ?? '')),
      'both alerts resolved',
    )
    console.log(`both resolved ${resolvedAfter.toFixed(1)} s after the space was freed`)
    const names = new Set(alertsOf(buildRules()).map((rule) => rule.alert))
    assert.ok(names.has(STORE_ALERT) && names.has(BURN_ALERT))
  })
})
