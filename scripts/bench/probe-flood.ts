// Probes under a flood (D20): does an orchestrator's probe still get its answer in time while a
// flood holds the API's event loop? One process and `--workers 2`, side by side in one run.
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
//
//   node scripts/bench/probe-flood.ts                         8 s per variant
//   node scripts/bench/probe-flood.ts --seconds 4 --connections 500
//   node scripts/bench/probe-flood.ts --aimed
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { generateApiKey } from '../../src/contract/api-key.ts'
import { requireWrk } from './load.ts'
import { type ServerProcess, startServer } from './processes.ts'
import { percentile } from './rounds.ts'
import { seed } from './seed.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const BENCH_DIR = join(ROOT, '.bench')
const PETS = 1_000
const PATH = '/v1/pets?limit=100'
const PROBE_INTERVAL_MS = 100
const PROBE_TIMEOUT_MS = 5_000

const { values: args } = parseArgs({
  options: {
    connections: { type: 'string', default: '2000' },
    seconds: { type: 'string', default: '8' },
    aimed: { type: 'boolean', default: false },
  },
})
const connections = Number(args.connections)
const seconds = Number(args.seconds)
const log = (line: string) => process.stdout.write(`${line}\n`)

interface ProbeFigures {
  count: number
  p50: number
  p99: number
  max: number
  failed: number
}

/** One prober process: GET `url` every 100 ms (or as given) on a new connection. */
function startProber(
  url: string,
  { forSeconds = seconds, intervalMs = PROBE_INTERVAL_MS, timeoutMs = PROBE_TIMEOUT_MS } = {},
): Promise<ProbeFigures> {
  const script = join(ROOT, 'scripts/bench/probe.ts')
  const child = spawn(
    process.execPath,
    [script, url, String(forSeconds), String(intervalMs), String(timeoutMs)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  )
  let out = ''
  child.stdout.on('data', (chunk) => {
    out += chunk
  })
  return once(child, 'exit').then(() => {
    const { probes } = JSON.parse(out) as { probes: [number, number | null][] }
    const answered = probes.map(([, ms]) => ms).filter((ms): ms is number => ms !== null)
    return {
      count: probes.length,
      p50: percentile(answered, 50),
      p99: percentile(answered, 99),
      max: Math.max(...answered),
      failed: probes.length - answered.length,
    }
  })
}

/** wrk's flood: answers per second and non-2xx answers, from its summary. */
async function flood(url: string, key: string): Promise<{ perSecond: number; non2xx: number }> {
  const child = spawn(
    requireWrk(),
    [
      '-t2',
      `-c${connections}`,
      `-d${seconds}s`,
      '--timeout',
      '10s',
      '-H',
      `Authorization: Bearer ${key}`,
      url + PATH,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  )
  let out = ''
  child.stdout.on('data', (chunk) => {
    out += chunk
  })
  await once(child, 'exit')
  return {
    perSecond: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? Number.NaN),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0),
  }
}

async function variant(name: string, serveArgs: string[], key: string) {
  const probePort = 20_000 + Math.floor(Math.random() * 20_000)
  const dbPath = join(BENCH_DIR, `probe-flood-${name.replace(/\W+/g, '-')}.db`)
  for (const suffix of ['', '-wal', '-shm']) rmSync(dbPath + suffix, { force: true })
  await seed(PETS, dbPath)
  const server: ServerProcess = await startServer(
    name,
    [join(ROOT, 'bin/petstore.js'), 'serve', ...serveArgs],
    {
      DATABASE_URL: `sqlite:${dbPath}`,
      PETSTORE_API_KEYS: key,
      PETSTORE_RATE_LIMIT: '0',
      PETSTORE_MAX_CONNECTIONS: String(connections * 2 + 1000),
      PROBE_PORT: String(probePort),
      METRICS_PORT: 'off',
      LOG_LEVEL: 'warn',
    },
    '/healthz',
  )
  try {
    const probeUrl = `http://127.0.0.1:${probePort}/healthz`
    const [onProbePort, onApiPort, load] = await Promise.all([
      startProber(probeUrl),
      startProber(`${server.url}/healthz`),
      flood(server.url, key),
    ])
    return { name, onProbePort, onApiPort, load }
  } finally {
    await server.stop()
  }
}

/** The flood aimed at the probe port (--aimed): the prober's figures and the flood's. */
async function aimed(key: string) {
  const AIMED = { connections: 600, intervalMs: 3_000, seconds: 20, peers: 20 }
  const probePort = 20_000 + Math.floor(Math.random() * 20_000)
  const dbPath = join(BENCH_DIR, 'probe-flood-aimed.db')
  for (const suffix of ['', '-wal', '-shm']) rmSync(dbPath + suffix, { force: true })
  await seed(PETS, dbPath)
  const server = await startServer(
    'aimed',
    [join(ROOT, 'bin/petstore.js'), 'serve'],
    {
      DATABASE_URL: `sqlite:${dbPath}`,
      PETSTORE_API_KEYS: key,
      PROBE_PORT: String(probePort),
      METRICS_PORT: 'off',
      LOG_LEVEL: 'warn',
    },
    '/healthz',
  )
  try {
    const peers = Array.from({ length: AIMED.peers }, (_, i) => `127.0.0.${i + 2}`).join(',')
    const floodArgs = [String(probePort), '/healthz', String(AIMED.connections)]
    const flood = spawn(
      process.execPath,
      [
        join(ROOT, 'scripts/bench/keep-alive-flood.ts'),
        '127.0.0.1',
        ...floodArgs,
        String(AIMED.intervalMs),
        String(AIMED.seconds + 1.5),
        peers,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    )
    let out = ''
    flood.stdout.on('data', (chunk) => {
      out += chunk
    })
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    const probes = await startProber(`http://127.0.0.1:${probePort}/healthz`, {
      forSeconds: AIMED.seconds,
      intervalMs: 500,
      timeoutMs: 1_000,
    })
    await once(flood, 'exit')
    const figures = JSON.parse(out) as { sent: number; answers: number; opened: number }
    return { AIMED, probes, figures }
  } finally {
    await server.stop()
  }
}

const ms = (value: number) => (Number.isFinite(value) ? `${Math.round(value)}` : '—')
const row = (port: string, f: ProbeFigures) =>
  `| ${port} | ${f.count} | ${ms(f.p50)} | ${ms(f.p99)} | ${ms(f.max)} | ${f.failed} |`

mkdirSync(BENCH_DIR, { recursive: true })
const key = generateApiKey('production')
const lines: string[] = []
if (args.aimed) {
  log('600 keep-alive connections aimed at PROBE_PORT for 20 s…')
  const { AIMED, probes, figures } = await aimed(key)
  lines.push(
    `A flood aimed at PROBE_PORT: ${AIMED.connections} keep-alive connections from ${AIMED.peers} addresses, each sending GET /healthz every ${AIMED.intervalMs / 1000} s and opened again when closed, for ${AIMED.seconds} s; /healthz every 500 ms on a new connection, 1 s timeout.`,
    '',
    `The flood sent ${figures.sent.toLocaleString('en')} requests, read ${figures.answers.toLocaleString('en')} answers and opened ${figures.opened.toLocaleString('en')} connections.`,
    '',
    '| /healthz on | probes | p50 ms | p99 ms | max ms | failed |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    row('PROBE_PORT', probes),
    '',
  )
} else {
  const results = []
  for (const [name, serveArgs] of [
    ['one process', []],
    ['--workers 2', ['--workers', '2']],
  ] as const) {
    log(`${name}: ${connections} connections of listPets limit=100 for ${seconds} s…`)
    results.push(await variant(name, [...serveArgs], key))
  }
  lines.push(
    `Probes under a flood: ${connections} keep-alive connections of GET ${PATH} for ${seconds} s (wrk), /healthz every ${PROBE_INTERVAL_MS} ms on a new connection, ${PROBE_TIMEOUT_MS / 1000} s timeout.`,
    '',
  )
  for (const { name, onProbePort, onApiPort, load } of results) {
    lines.push(
      `**${name}**: the flood got ${Math.round(load.perSecond).toLocaleString('en')} answers/s, ${load.non2xx} not 2xx.`,
      '',
      '| /healthz on | probes | p50 ms | p99 ms | max ms | failed |',
      '| --- | ---: | ---: | ---: | ---: | ---: |',
      row('PROBE_PORT', onProbePort),
      row('the API port', onApiPort),
      '',
    )
  }
}
const report = lines.join('\n')
writeFileSync(join(BENCH_DIR, args.aimed ? 'probe-flood-aimed.md' : 'probe-flood.md'), report)
log(report)
