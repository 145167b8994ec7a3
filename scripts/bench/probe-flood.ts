// `npm run bench -- probe-flood`: probes under a flood (D20). Does an orchestrator's probe still
// get its answer in time while a flood holds the API's event loop? One process and `--workers 2`.
//
// Each variant is `bin/petstore.js serve` as an operator runs it (LOG_LEVEL=warn, no rate limit,
// a key in PETSTORE_API_KEYS, PROBE_PORT set, PETSTORE_MAX_CONNECTIONS above the flood) on a copy
// of a SQLite file with 1,000 pets. wrk, another process, holds 2,000 keep-alive connections each
// sending listPets `limit=100` (a full page) back to back, one in flight per connection, while two
// probers, each a process of its own, GET /healthz every 100 ms on a new connection (as kubelet
// does): one on PROBE_PORT, one on the API's port. Figures: each prober's p50, p99, max and
// failures (no answer within 5 s, or not 200), and the flood's answers per second.
//
// With --aimed, the flood is aimed at the probe port itself instead, as any peer that reaches it
// could: 600 connections from 20 other addresses (127.0.0.2–21), each sending GET /healthz every
// 3 s and opened again whenever closed (scripts/bench/keep-alive-flood.ts), for 20 s, while a
// prober GETs /healthz there every 500 ms on a new connection with kubelet's 1 s time-out.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { generateApiKey } from '../../src/contract/api-key.ts'
import * as harness from './harness.ts'
import { removeDatabase, seed } from './seed.ts'

export const usage = `[--seconds 8] [--connections 2000] | --aimed
      /healthz on PROBE_PORT and on the API's port while a flood holds the API (one process,
      then --workers 2); --aimed: a keep-alive flood aimed at PROBE_PORT itself`

const PATH = '/v1/pets?limit=100'
const PROBE = { intervalMs: 100, timeoutMs: 5_000 }
const AIMED = { connections: 600, intervalMs: 3_000, seconds: 20, peers: 20 }

/** What a command (a process of its own, beside the load) prints, once it has exited. */
async function outputOf(file: string, args: (string | number)[]): Promise<string> {
  const child = spawn(file, args.map(String), { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (chunk) => {
    out += chunk
  })
  await once(child, 'exit')
  return out
}

/** A prober (probe.ts): GET `url` every `intervalMs` on a new connection; its figures in ms. */
async function probe(url: string, seconds: number, { intervalMs, timeoutMs } = PROBE) {
  const script = join(harness.ROOT, 'scripts/bench/probe.ts')
  const output = await outputOf(process.execPath, [script, url, seconds, intervalMs, timeoutMs])
  const { probes } = JSON.parse(output) as { probes: [number, number | null][] }
  const answered = probes.map(([, ms]) => ms).filter((ms): ms is number => ms !== null)
  const [p50, p99] = [harness.percentile(answered, 50), harness.percentile(answered, 99)]
  return {
    count: probes.length,
    p50,
    p99,
    max: Math.max(...answered),
    failed: probes.length - answered.length,
  }
}

/** wrk's flood of listPets `limit=100`: answers per second and non-2xx answers. */
async function flood(url: string, key: string, connections: number, seconds: number) {
  const auth = `Authorization: Bearer ${key}`
  const args = ['-t2', `-c${connections}`, `-d${seconds}s`, '--timeout', '10s', '-H', auth]
  const out = await outputOf(harness.requireWrk(), [...args, url + PATH])
  return {
    perSecond: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? Number.NaN),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0),
  }
}

/**
 * `serve` on a fresh seed of 1,000 pets with PROBE_PORT set, metrics off, and `settings`; `work`
 * is given the server and its probe URL, and the server is stopped after it.
 */
async function withServer<T>(
  name: string,
  key: string,
  settings: { serveArgs?: readonly string[]; env?: Record<string, string> },
  work: (server: harness.ServerProcess, probeUrl: string) => Promise<T>,
): Promise<T> {
  const probePort = 20_000 + Math.floor(Math.random() * 20_000)
  const db = join(harness.BENCH_DIR, `probe-flood-${name.replace(/\W+/g, '-')}.db`)
  removeDatabase(db)
  await seed(1_000, db)
  const own = { PROBE_PORT: String(probePort), METRICS_PORT: 'off', LOG_LEVEL: 'warn' }
  const env = harness.serviceEnv(key, { sqlite: db }, { ...own, ...settings.env })
  const serve = [join(harness.ROOT, 'bin/petstore.js'), 'serve', ...(settings.serveArgs ?? [])]
  const server = await harness.startServer(name, serve, env, '/healthz')
  try {
    return await work(server, `http://127.0.0.1:${probePort}/healthz`)
  } finally {
    await server.stop()
  }
}

/** The head of a table of probes, and its row for one prober's figures. */
const TABLE_HEAD = [
  '| /healthz on | probes | p50 ms | p99 ms | max ms | failed |',
  '| --- | ---: | ---: | ---: | ---: | ---: |',
]
function row(port: string, f: Awaited<ReturnType<typeof probe>>): string {
  const ms = (value: number) => (Number.isFinite(value) ? `${Math.round(value)}` : '—')
  return `| ${port} | ${f.count} | ${ms(f.p50)} | ${ms(f.p99)} | ${ms(f.max)} | ${f.failed} |`
}

/** The flood aimed at the probe port (--aimed), from keep-alive-flood.ts's other addresses. */
async function aimed(key: string): Promise<string[]> {
  harness.log('600 keep-alive connections aimed at PROBE_PORT for 20 s…')
  const { connections, intervalMs, seconds, peers } = AIMED
  const { probes, figures } = await withServer('aimed', key, {}, async (_, probeUrl) => {
    const addresses = Array.from({ length: peers }, (_, i) => `127.0.0.${i + 2}`).join(',')
    const script = join(harness.ROOT, 'scripts/bench/keep-alive-flood.ts')
    const target = ['127.0.0.1', new URL(probeUrl).port, '/healthz']
    const how = [connections, intervalMs, seconds + 1.5, addresses]
    const flooding = outputOf(process.execPath, [script, ...target, ...how])
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    const probes = await probe(probeUrl, seconds, { intervalMs: 500, timeoutMs: 1_000 })
    const figures = JSON.parse(await flooding) as { sent: number; answers: number; opened: number }
    return { probes, figures }
  })
  const count = (n: number) => n.toLocaleString('en')
  return [
    `A flood aimed at PROBE_PORT: ${connections} keep-alive connections from ${peers} addresses, each sending GET /healthz every ${intervalMs / 1000} s and opened again when closed, for ${seconds} s; /healthz every 500 ms on a new connection, 1 s timeout.`,
    '',
    `The flood sent ${count(figures.sent)} requests, read ${count(figures.answers)} answers and opened ${count(figures.opened)} connections.`,
    '',
    ...TABLE_HEAD,
    row('PROBE_PORT', probes),
    '',
  ]
}

/** The flood on the API's port, one process and then --workers 2. */
async function onApi(key: string, connections: number, seconds: number): Promise<string[]> {
  const lines = [
    `Probes under a flood: ${connections} keep-alive connections of GET ${PATH} for ${seconds} s (wrk), /healthz every ${PROBE.intervalMs} ms on a new connection, ${PROBE.timeoutMs / 1000} s timeout.`,
    '',
  ]
  const env = { PETSTORE_MAX_CONNECTIONS: String(connections * 2 + 1000) }
  for (const [name, serveArgs] of [
    ['one process', []],
    ['--workers 2', ['--workers', '2']],
  ] as const) {
    harness.log(`${name}: ${connections} connections of listPets limit=100 for ${seconds} s…`)
    const [onProbePort, onApiPort, load] = await withServer(
      name,
      key,
      { serveArgs, env },
      (server, probeUrl) =>
        Promise.all([
          probe(probeUrl, seconds),
          probe(`${server.url}/healthz`, seconds),
          flood(server.url, key, connections, seconds),
        ]),
    )
    const answers = Math.round(load.perSecond).toLocaleString('en')
    lines.push(`**${name}**: the flood got ${answers} answers/s, ${load.non2xx} not 2xx.`, '')
    lines.push(...TABLE_HEAD, row('PROBE_PORT', onProbePort), row('the API port', onApiPort), '')
  }
  return lines
}

export async function main(argv: string[]): Promise<void> {
  const options = {
    connections: { type: 'string', default: '2000' },
    seconds: { type: 'string', default: '8' },
    aimed: { type: 'boolean', default: false },
  } as const
  const { values: args } = parseArgs({ args: argv, options })
  mkdirSync(harness.BENCH_DIR, { recursive: true })
  const key = generateApiKey('production')
  const lines = args.aimed
    ? await aimed(key)
    : await onApi(key, Number(args.connections), Number(args.seconds))
  const report = lines.join('\n')
  writeFileSync(
    join(harness.BENCH_DIR, args.aimed ? 'probe-flood-aimed.md' : 'probe-flood.md'),
    report,
  )
  harness.log(report)
}
