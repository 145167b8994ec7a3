// Overload (D16): many more connections than one process can serve promptly, side by side in one
// run, for several load-shedding thresholds (and, with --base, another checkout of the service).
//
// Each variant is `bin/petstore.js serve` as an operator runs it (LOG_LEVEL=warn, no rate limit,
// a key in PETSTORE_API_KEYS) on its own copy of a SQLite file with 100,000 pets, pinned to one
// core. Per round and variant: autocannon (this process, the other core) holds <connections>
// keep-alive connections sending listPets `limit=20`, one request in flight each, while a prober
// in its own process GETs /healthz every 100 ms on a new connection. Variants alternate in order
// from round to round; figures are medians over the rounds.
//
//   node scripts/bench/overload.ts                         thresholds 0 (off) and the default
//   node scripts/bench/overload.ts --thresholds 0,50,100,200 --connections 2000 --seconds 10
//   node scripts/bench/overload.ts --base ../petstore-main  and another checkout (its own defaults)
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import autocannon from 'autocannon'
import { configDefaults } from '../../src/config.ts'
import { generateApiKey } from '../../src/contract/api-key.ts'
import { pinning, pinSelf, type ServerProcess, startServer } from './processes.ts'
import { percentile } from './rounds.ts'
import { seed } from './seed.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const BENCH_DIR = join(ROOT, '.bench')
const PETS = 100_000
const PATH = '/v1/pets?limit=20'

const { values: args } = parseArgs({
  options: {
    base: { type: 'string' },
    thresholds: {
      type: 'string',
      default: `0,${configDefaults.PETSTORE_MAX_EVENT_LOOP_DELAY_MS}`,
    },
    connections: { type: 'string', default: '2000' },
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
  },
})
const connections = Number(args.connections)
const seconds = Number(args.seconds)
const rounds = Number(args.rounds)
const log = (line: string) => process.stdout.write(`${line}\n`)

interface Variant {
  name: string
  dir: string
  env: Record<string, string>
}

const variants: Variant[] = []
if (args.base !== undefined) variants.push({ name: 'base', dir: resolve(args.base), env: {} })
for (const threshold of args.thresholds.split(',')) {
  variants.push({
    name: threshold === '0' ? 'shedding off' : `shedding at ${threshold} ms`,
    dir: ROOT,
    env: { PETSTORE_MAX_EVENT_LOOP_DELAY_MS: threshold },
  })
}

interface Figures {
  /** Answers of any status per second, and 2xx answers per second. */
  answersPerSecond: number
  okPerSecond: number
  /** Share of answers that were 503, in %. */
  shed503Percent: number
  otherNon2xx: number
  errors: number
  timeouts: number
  /** Latency percentiles in ms: every answer, 2xx only, 503 only. */
  p50: number
  p99: number
  max: number
  okP99: number
  shedP99: number
  /**
   * The same without each connection's first answer, whose time includes connecting: with
   * thousands of connections opened at once, the kernel's accept queue overflows and a dropped
   * SYN is retried after 1 s, then 3 s (TCP's initial retransmission timeout).
   */
  steadyP99: number
  steadyOkP99: number
  /** Connections the kernel dropped because the accept queue was full (machine-wide counter). */
  listenOverflows: number
  /** /healthz on a new connection every 100 ms meanwhile. */
  healthP50: number
  healthP99: number
  healthMax: number
  /** The same for probes sent 2 s or more after the load began, once its connections are open. */
  healthSteadyP99: number
  healthSteadyMax: number
  healthFailures: number
}

async function seededCopy(name: string): Promise<string> {
  mkdirSync(BENCH_DIR, { recursive: true })
  const seedPath = join(BENCH_DIR, `overload-seed-${PETS}.db`)
  if (!existsSync(seedPath)) {
    log(`seeding ${PETS.toLocaleString('en')} pets…`)
    await seed(PETS, seedPath)
  }
  const copy = join(BENCH_DIR, `overload-${name.replace(/\W+/g, '-')}.db`)
  for (const suffix of ['', '-wal', '-shm']) rmSync(copy + suffix, { force: true })
  copyFileSync(seedPath, copy)
  return copy
}

function startProber(url: string): Promise<{ probes: [number, number | null][] }> {
  const command = [process.execPath, join(ROOT, 'scripts/bench/probe.ts'), url, String(seconds)]
  const full = [...command, '100']
  const [file, ...rest] = pinning ? ['/usr/bin/taskset', '-c', pinning.load, ...full] : full
  const child = spawn(file as string, rest, { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (chunk) => {
    out += chunk
  })
  return once(child, 'exit').then(() => JSON.parse(out))
}

async function run(server: ServerProcess, key: string, load: number, s: number) {
  const statuses = new Map<number, number>()
  const seen = new WeakSet<object>()
  const steady: number[] = []
  const steadyOk: number[] = []
  const all: number[] = []
  const ok: number[] = []
  const shed: number[] = []
  let finished: (result: autocannon.Result) => void = () => {}
  let failed: (err: unknown) => void = () => {}
  const done = new Promise<autocannon.Result>((res, rej) => {
    finished = res
    failed = rej
  })
  const instance = autocannon(
    {
      url: server.url + PATH,
      headers: { authorization: `Bearer ${key}` },
      connections: load,
      pipelining: 1,
      duration: s,
      timeout: 10,
    },
    (err, result) => (err ? failed(err) : finished(result)),
  )
  instance.on('response', (client, status, _bytes, ms) => {
    statuses.set(status, (statuses.get(status) ?? 0) + 1)
    all.push(ms)
    const success = status >= 200 && status < 300
    if (success) ok.push(ms)
    else if (status === 503) shed.push(ms)
    if (seen.has(client)) {
      steady.push(ms)
      if (success) steadyOk.push(ms)
    } else seen.add(client)
  })
  const result = await done
  return { result, statuses, all, ok, shed, steady, steadyOk }
}

async function measure(server: ServerProcess, key: string): Promise<Figures> {
  const overflowsBefore = listenOverflows()
  const prober = startProber(`${server.url}/healthz`)
  const { result, statuses, all, ok, shed, steady, steadyOk } = await run(
    server,
    key,
    connections,
    seconds,
  )
  const health = await prober
  const answered = health.probes.filter((p): p is [number, number] => p[1] !== null)
  const healthAll = answered.map(([, ms]) => ms)
  const healthSteady = answered.filter(([at]) => at >= 2000).map(([, ms]) => ms)
  const total = all.length
  return {
    answersPerSecond: total / result.duration,
    okPerSecond: ok.length / result.duration,
    shed503Percent: total === 0 ? 0 : (100 * shed.length) / total,
    otherNon2xx: total - ok.length - shed.length,
    errors: result.errors,
    timeouts: result.timeouts,
    p50: percentile(all, 50),
    p99: percentile(all, 99),
    max: percentile(all, 100),
    okP99: percentile(ok, 99),
    shedP99: percentile(shed, 99),
    steadyP99: percentile(steady, 99),
    steadyOkP99: percentile(steadyOk, 99),
    listenOverflows: listenOverflows() - overflowsBefore,
    healthP50: percentile(healthAll, 50),
    healthP99: percentile(healthAll, 99),
    healthMax: percentile(healthAll, 100),
    healthSteadyP99: percentile(healthSteady, 99),
    healthSteadyMax: percentile(healthSteady, 100),
    healthFailures: health.probes.filter(([, ms]) => ms === null).length,
    ...(statuses.size > 2 ? { statuses: Object.fromEntries(statuses) } : {}),
  }
}

const median = (values: number[]) => percentile(values, 50)

function listenOverflows(): number {
  const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n')
  const names = lines.find((line) => line.startsWith('TcpExt:'))?.split(/\s+/) ?? []
  const values = lines.filter((line) => line.startsWith('TcpExt:'))[1]?.split(/\s+/) ?? []
  return Number(values[names.indexOf('ListenOverflows')] ?? Number.NaN)
}

pinSelf()
const key = generateApiKey('production')
const servers: ServerProcess[] = []
try {
  for (const variant of variants) {
    const db = await seededCopy(variant.name)
    servers.push(
      await startServer(
        variant.name,
        [join(variant.dir, 'bin/petstore.js'), 'serve'],
        {
          DATABASE_URL: `sqlite:${db}`,
          LOG_LEVEL: 'warn',
          // A free port: the default, 9464, may be taken by another variant.
          METRICS_PORT: '0',
          PETSTORE_RATE_LIMIT: '0',
          PETSTORE_API_KEYS: key,
          ...variant.env,
        },
        '/readyz',
      ),
    )
  }
  for (const server of servers) await run(server, key, 50, 3) // warm-up: JIT, caches

  const byVariant = new Map<string, Figures[]>(variants.map((v) => [v.name, []]))
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? servers : [...servers].reverse()
    for (const server of order) {
      await new Promise((res) => setTimeout(res, 2000)) // connections close, the loop settles
      const figures = await measure(server, key)
      byVariant.get(server.name)?.push(figures)
      log(`round ${round + 1} ${server.name}: ${JSON.stringify(figures)}`)
    }
  }

  const rows = variants.map((variant) => {
    const runs = byVariant.get(variant.name) ?? []
    const m = (pick: (f: Figures) => number) => median(runs.map(pick))
    return {
      name: variant.name,
      okPerSecond: m((f) => f.okPerSecond),
      answersPerSecond: m((f) => f.answersPerSecond),
      shed503Percent: m((f) => f.shed503Percent),
      p99: m((f) => f.p99),
      okP99: m((f) => f.okP99),
      steadyP99: m((f) => f.steadyP99),
      steadyOkP99: m((f) => f.steadyOkP99),
      max: m((f) => f.max),
      healthP50: m((f) => f.healthP50),
      healthP99: m((f) => f.healthP99),
      healthMax: m((f) => f.healthMax),
      healthSteadyP99: m((f) => f.healthSteadyP99),
      healthSteadyMax: m((f) => f.healthSteadyMax),
      listenOverflows: m((f) => f.listenOverflows),
      failures: runs.reduce((n, f) => n + f.errors + f.timeouts + f.otherNon2xx, 0),
      healthFailures: runs.reduce((n, f) => n + f.healthFailures, 0),
    }
  })
  const fmt = (n: number, digits = 0) => (Number.isNaN(n) ? '–' : n.toFixed(digits))
  log('')
  log(
    `${connections} connections, listPets limit=20, ${rounds} rounds of ${seconds} s, medians; /healthz every 100 ms on a new connection meanwhile. "Steady": without each connection's first answer, which includes connecting; for /healthz, probes from 2 s on.`,
  )
  log('')
  log(
    '| variant | 2xx/s | answers/s | 503 share | p99 ms | p99 of 2xx ms | steady p99 ms | steady p99 of 2xx ms | max ms | /healthz p50 / p99 / max ms | steady /healthz p99 / max ms | listen overflows | errors, timeouts, other | /healthz failures |',
  )
  log('| --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |')
  for (const r of rows) {
    log(
      `| ${r.name} | ${fmt(r.okPerSecond)} | ${fmt(r.answersPerSecond)} | ${fmt(r.shed503Percent, 1)}% | ${fmt(r.p99)} | ${fmt(r.okP99)} | ${fmt(r.steadyP99)} | ${fmt(r.steadyOkP99)} | ${fmt(r.max)} | ${fmt(r.healthP50)} / ${fmt(r.healthP99)} / ${fmt(r.healthMax)} | ${fmt(r.healthSteadyP99)} / ${fmt(r.healthSteadyMax)} | ${fmt(r.listenOverflows)} | ${r.failures} | ${r.healthFailures} |`,
    )
  }
  writeFileSync(
    join(BENCH_DIR, 'overload.json'),
    `${JSON.stringify({ connections, seconds, rounds, rows, runs: Object.fromEntries(byVariant) }, null, 2)}\n`,
  )
} finally {
  for (const server of servers) await server.stop()
}
