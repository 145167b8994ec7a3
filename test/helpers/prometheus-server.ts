// Debian's Prometheus for the monitoring tests (D31): `promtool` to check and unit-test the rule
// file, and a private `prometheus` server on a free port, with its configuration and data in a
// temp folder, scraping the targets a test gives it every second and evaluating its rules as
// often. `.ci/run` installs the package; where it is absent the tests skip with one line, or fail
// with PETSTORE_REQUIRE_PROMETHEUS=1.
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { debianProgram } from './debian-program.ts'
import { freePort } from './free-port.ts'

export const PROMETHEUS_REQUIRED = process.env.PETSTORE_REQUIRE_PROMETHEUS === '1'
const required = { variable: 'PETSTORE_REQUIRE_PROMETHEUS', set: PROMETHEUS_REQUIRED }

export const promtool = debianProgram({
  name: 'promtool',
  candidates: ['/usr/bin/promtool'],
  absent: 'promtool is not installed (Debian package prometheus); the rule tests are skipped',
  required,
})

export const prometheusProgram = debianProgram({
  name: 'prometheus',
  candidates: ['/usr/bin/prometheus'],
  absent:
    'prometheus is not installed (Debian package prometheus); the tests on a real Prometheus are skipped',
  required,
})

/** One alert as /api/v1/alerts lists it. */
export interface Alert {
  labels: Record<string, string>
  annotations: Record<string, string>
  state: 'pending' | 'firing'
  activeAt: string
  value: string
}

/** One series of an instant query's result. */
export interface Series {
  metric: Record<string, string>
  value: [number, string]
}

export interface PrometheusServer {
  url: string
  /** The alerts pending or firing now. */
  alerts(): Promise<Alert[]>
  /** An instant query, now. */
  query(expr: string): Promise<Series[]>
  /** What it wrote to stderr (its log). */
  log(): string
  stop(): Promise<void>
}

export interface PrometheusOptions {
  /** host:port of each target of the job. */
  targets: string[]
  job: string
  /** The rule file's text. */
  rules: string
  /** Scrape and evaluation interval; 1s unless given. */
  interval?: string
}

interface ApiAnswer<T> {
  status: 'success' | 'error'
  data: T
  error?: string
}

async function api<T>(url: string): Promise<T> {
  const response = await fetch(url)
  const answer = (await response.json()) as ApiAnswer<T>
  if (answer.status !== 'success') throw new Error(`${url}: ${answer.error ?? response.status}`)
  return answer.data
}

async function waitUntilReady(url: string, child: ChildProcess, log: () => string) {
  const deadline = Date.now() + 20_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`prometheus exited:\n${log()}`)
    const ready = await fetch(`${url}/-/ready`).then(
      (response) => response.ok,
      () => false,
    )
    if (ready) return
    if (Date.now() > deadline) throw new Error(`prometheus did not get ready:\n${log()}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

export async function startPrometheus(options: PrometheusOptions): Promise<PrometheusServer> {
  const binary = prometheusProgram.binary()
  if (binary === undefined) throw new Error(prometheusProgram.absentLine())
  const dir = mkdtempSync(join(tmpdir(), 'petstore-prometheus-'))
  const interval = options.interval ?? '1s'
  writeFileSync(join(dir, 'rules.yaml'), options.rules)
  writeFileSync(
    join(dir, 'prometheus.yaml'),
    stringify({
      global: {
        scrape_interval: interval,
        evaluation_interval: interval,
        scrape_timeout: interval,
      },
      rule_files: [join(dir, 'rules.yaml')],
      scrape_configs: [{ job_name: options.job, static_configs: [{ targets: options.targets }] }],
    }),
  )
  const port = await freePort()
  const child = spawn(
    binary,
    [
      `--config.file=${join(dir, 'prometheus.yaml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  )
  let stderr = ''
  child.stderr.on('data', (chunk) => {
    stderr += chunk
  })
  const url = `http://127.0.0.1:${port}`
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      await once(child, 'exit')
    }
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    await waitUntilReady(url, child, () => stderr)
  } catch (err) {
    await stop()
    throw err
  }
  return {
    url,
    alerts: async () => (await api<{ alerts: Alert[] }>(`${url}/api/v1/alerts`)).alerts,
    query: async (expr) =>
      (await api<{ result: Series[] }>(`${url}/api/v1/query?query=${encodeURIComponent(expr)}`))
        .result,
    log: () => stderr,
    stop,
  }
}
