// `npm run bench -- auth-flood`: a legitimate client's latency while failed authentications come
// from more than 100,000 addresses a minute (issue 53, D3), and what forgetting the oldest entry
// of a bounded map costs per operation. With --base, another checkout (e.g. the commit before a
// change) is measured beside this one, in alternating turns.
//
// Each checkout is `bin/petstore.js serve` as an operator runs it behind a balancer
// (PETSTORE_TRUSTED_PROXIES=127.0.0.1, the failed-authentication limit and the key cache at
// their defaults, no request budget, load shedding out of reach) on its own copy of a SQLite file
// with 1,000 pets. A turn: the legitimate client alone (listPets `limit=20` with its key, from
// wrk, at a fixed rate unless --client-rate 0: a client that does not fill the service, so that
// what it waits for is the flood's); then, at the start of a minute (the limit's window), failures back to back until more
// than 100,000 addresses have failed in the window, so that every map is full; then the same
// client again while the flood goes on at a fixed rate (`--rate`, a second). Every flood request
// carries a well-formed key the store does not know (so it is hashed, looked up and refused) and
// an X-Forwarded-For address no request has sent before (auth-flood.lua). wrk, both clients, runs
// on the load core; the service on its own core. Figures: the client's answers a second, p50 and
// p99, with and without the flood; the flood's rate and answers; the load core's share.
//
// Per operation (eviction.ts, in a process for each checkout): µs per failure from a new address
// with the limit's 100,000 addresses full, and per refusal of a new hash with the key cache's
// 10,000 entries full, each against the same work below the bound.
import { execFile } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import { generateApiKey } from '../../src/contract/api-key.ts'
import * as harness from './harness.ts'
import { seededCopy } from './seed.ts'

export const usage = `[--base <other checkout>] [--rounds 3] [--seconds 15] [--rate 2000]
      [--connections 10] [--client-rate 1000] [--fill 140000] [--operations 200000] [--quick]
      a client's latency with and without failed authentications from 100,000+ addresses a
      minute, and the eviction's cost per operation; --base: that checkout too, side by side`

const CLIENT_PATH = '/v1/pets?limit=20'
const FLOOD_PATH = '/v1/pets?limit=20'
/**
 * Addresses that must have failed in a window before the flood is measured (unless --fill says
 * otherwise): every map full, and turned over by a third of the limit's bound, as in a flood that
 * has gone on for a while. --fill 0 measures the same flood with every map below its bound.
 */
const FILL = 140_000
const FLOOD_CONNECTIONS = 50
const TOKENS = 50_000

type Summary = {
  requests: number
  durationUs: number
  errors: number
  s2xx: number
  s401: number
  s429: number
  other: number
  p50Us: number
  p99Us: number
  maxUs: number
}

/** wrk with auth-flood.lua, on the load core: its summary line. */
async function wrk(url: string, connections: number, seconds: number, args: string[]) {
  const script = join(harness.ROOT, 'scripts/bench/auth-flood.lua')
  const wrkArgs = [
    ...['-t1', `-c${connections}`, `-d${seconds}s`, '--latency', '--timeout', '10s'],
    ...['-s', script, url, '--', ...args],
  ]
  const command = [harness.requireWrk(), ...wrkArgs]
  const [file, ...rest] = harness.pinning
    ? [harness.TASKSET, '-c', harness.pinning.load, ...command]
    : command
  const { stdout } = await promisify(execFile)(file as string, rest)
  const line = /^auth-flood-summary (.+)$/m.exec(stdout)?.[1]
  if (line === undefined) throw new Error(`wrk ${wrkArgs.join(' ')} gave no summary:\n${stdout}`)
  return JSON.parse(line) as Summary
}

/** What the two clients are sent with. */
type Settings = {
  seconds: number
  rate: number
  connections: number
  clientRate: number
  fill: number
  key: string
  tokens: string
}

/** Addresses are never sent twice in a run: each flood starts where the last ended. */
let nextAddress = 0

function flood(server: harness.ServerProcess, s: Settings, rate: number, seconds: number) {
  const first = nextAddress
  // Room for what a flood at this rate (or back to back, at most ~50,000 a second) can send.
  nextAddress += Math.ceil((rate > 0 ? rate * 1.5 : 50_000) * seconds) + 1
  const args = ['flood', String(rate), FLOOD_PATH, s.tokens, String(first)]
  return wrk(server.url, FLOOD_CONNECTIONS, seconds, args)
}

function client(server: harness.ServerProcess, s: Settings) {
  const args = ['client', String(s.clientRate), CLIENT_PATH, s.key]
  return wrk(server.url, s.connections, s.seconds, args)
}

/** The client's figures: answers a second and latencies in ms; voided by anything but 2xx. */
function clientFigures(name: string, summary: Summary) {
  const { requests, s2xx, errors } = summary
  if (s2xx !== requests || errors > 0 || requests === 0) {
    throw new Error(`${name}: the client got ${s2xx} 2xx of ${requests}, ${errors} errors`)
  }
  return {
    rps: requests / (summary.durationUs / 1e6),
    p50: summary.p50Us / 1000,
    p99: summary.p99Us / 1000,
  }
}

/** Waits for the next minute, the failed-authentication limit's window, to start. */
async function nextWindow(): Promise<void> {
  const wait = 60_000 - (Date.now() % 60_000) + 100
  await new Promise((done) => setTimeout(done, wait))
}

/** Back-to-back failures from new addresses until `s.fill` have failed in this window. */
async function fill(server: harness.ServerProcess, s: Settings): Promise<number> {
  const started = Date.now()
  for (let failed = 0; failed < s.fill; ) {
    const summary = await flood(server, s, 0, 2)
    if (summary.s401 !== summary.requests) {
      throw new Error(`${server.name}: while filling, ${summary.s401} of ${summary.requests} 401`)
    }
    failed += summary.s401
  }
  const seconds = (Date.now() - started) / 1000
  if (seconds + s.seconds > 57) {
    throw new Error(`${server.name}: filling took ${seconds} s; the window would end measuring`)
  }
  return seconds
}

/** One checkout's turn: the client alone, then with the flood (in one window, maps full). */
async function turn(server: harness.ServerProcess, s: Settings) {
  const quiet = clientFigures(`${server.name}, alone`, await client(server, s))
  await nextWindow()
  const fillSeconds = await fill(server, s)
  const coreBefore = harness.pinning && harness.cpuTicks(`cpu${harness.pinning.load}`)
  const cpuBefore = harness.cpuSeconds(server.pid)
  const [alongside, floodSummary] = await Promise.all([
    client(server, s),
    flood(server, s, s.rate, s.seconds),
  ])
  const cpu = harness.cpuSeconds(server.pid) - cpuBefore
  const coreAfter = harness.pinning && harness.cpuTicks(`cpu${harness.pinning.load}`)
  const busy = (t: ReturnType<typeof harness.cpuTicks>) => t.busy + t.steal
  const flooded = clientFigures(`${server.name}, under the flood`, alongside)
  if (floodSummary.s401 !== floodSummary.requests) {
    throw new Error(
      `${server.name}: the flood got ${floodSummary.s401} 401 of ${floodSummary.requests}`,
    )
  }
  return {
    quiet,
    flooded,
    fillSeconds,
    floodPerSecond: floodSummary.requests / (floodSummary.durationUs / 1e6),
    serverCpuShare: cpu / s.seconds,
    loadCoreBusy:
      coreBefore && coreAfter
        ? (busy(coreAfter) - busy(coreBefore)) / (coreAfter.total - coreBefore.total)
        : Number.NaN,
  }
}

type Turn = Awaited<ReturnType<typeof turn>>

/** eviction.ts on a checkout: µs per operation of each repeat, by case. */
async function perOperation(checkout: string, operations: number, repeats: number) {
  const script = join(harness.ROOT, 'scripts/bench/eviction.ts')
  const args = [script, checkout, String(operations), String(repeats)]
  const { stdout } = await promisify(execFile)(process.execPath, args, { maxBuffer: 1 << 20 })
  return JSON.parse(stdout) as Record<
    'failureAtBound' | 'failureBelowBound' | 'missAtBound' | 'missBelowBound',
    number[]
  >
}

type PerOperation = Awaited<ReturnType<typeof perOperation>>

const spread = (values: number[], digits: number) => {
  const f = (n: number) => n.toFixed(digits)
  const [low, high] = [Math.min(...values), Math.max(...values)]
  return `${f(harness.median(values))} (${f(low)}–${f(high)})`
}

function report(
  args: {
    base?: string
    rate: number
    seconds: number
    connections: number
    clientRate: number
    fill: number
  },
  checkouts: { name: string; turns: Turn[]; ops: PerOperation }[],
): string {
  const client =
    args.clientRate > 0
      ? `${args.connections} connections sending ${args.clientRate} requests a second in all`
      : `${args.connections} connections, one request in flight each, back to back`
  const lines = [
    `A client (GET ${CLIENT_PATH}, ${client}) for ${args.seconds} s alone, then for ${args.seconds} s beside a flood of ${args.rate.toLocaleString('en')} failed authentications a second (${(args.rate * 60).toLocaleString('en')} a minute), each from a new X-Forwarded-For address behind a trusted balancer with a well-formed unknown key, started once ${args.fill.toLocaleString('en')} addresses had failed in the window. Median of ${checkouts[0]?.turns.length ?? 0} turns (lowest–highest).`,
    '',
    '| checkout | client alone: req/s | p50 ms | p99 ms | with the flood: req/s | p50 ms | p99 ms | p99 flood ÷ alone | flood failures/s | service core busy | load core busy |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ]
  for (const { name, turns } of checkouts) {
    const of = (pick: (t: Turn) => number, digits = 2) => spread(turns.map(pick), digits)
    lines.push(
      `| ${name} | ${of((t) => t.quiet.rps, 0)} | ${of((t) => t.quiet.p50)} | ${of((t) => t.quiet.p99)} | ${of((t) => t.flooded.rps, 0)} | ${of((t) => t.flooded.p50)} | ${of((t) => t.flooded.p99)} | ${of((t) => t.flooded.p99 / t.quiet.p99)} | ${of((t) => t.floodPerSecond, 0)} | ${of((t) => t.serverCpuShare * 100, 0)}% | ${of((t) => t.loadCoreBusy * 100, 0)}% |`,
    )
  }
  lines.push(
    '',
    'Per operation, in process (eviction.ts), µs, median of the repeats (lowest–highest):',
    '',
    '| checkout | per failure, 100,000 addresses full | below the bound | per refused hash, 10,000 entries full | below the bound |',
    '| --- | ---: | ---: | ---: | ---: |',
  )
  for (const { name, ops } of checkouts) {
    lines.push(
      `| ${name} | ${spread(ops.failureAtBound, 2)} | ${spread(ops.failureBelowBound, 2)} | ${spread(ops.missAtBound, 2)} | ${spread(ops.missBelowBound, 2)} |`,
    )
  }
  if (args.base !== undefined) lines.push('', `base: ${args.base}`)
  return lines.join('\n')
}

export async function main(argv: string[]): Promise<void> {
  const { parseArgs } = await import('node:util')
  const text = (value?: string) => ({ type: 'string', default: value }) as const
  const options = {
    ...{ base: text(), rounds: text(), seconds: text(), rate: text('2000') },
    ...{ connections: text('10'), 'client-rate': text('1000'), operations: text() },
    fill: text(String(FILL)),
    quick: { type: 'boolean', default: false },
  } as const
  const { values } = parseArgs({ args: argv, options })
  const quick = values.quick
  const args = {
    base: values.base === undefined ? undefined : resolve(values.base),
    rounds: Number(values.rounds ?? (quick ? 1 : 3)),
    seconds: Number(values.seconds ?? (quick ? 5 : 15)),
    rate: Number(values.rate),
    connections: Number(values.connections),
    clientRate: Number(values['client-rate']),
    fill: Number(values.fill),
    operations: Number(values.operations ?? (quick ? 20_000 : 200_000)),
  }
  harness.requireWrk()
  mkdirSync(harness.BENCH_DIR, { recursive: true })
  const tokens = join(harness.BENCH_DIR, 'auth-flood-tokens.txt')
  writeFileSync(
    tokens,
    `${Array.from({ length: TOKENS }, () => generateApiKey('production')).join('\n')}\n`,
  )
  const key = generateApiKey('production')
  const settings: Settings = { ...args, key, tokens }
  const checkouts = [
    ...(args.base === undefined ? [] : [{ name: 'base', path: args.base }]),
    { name: 'this', path: harness.ROOT },
  ]

  const ops: PerOperation[] = []
  for (const { name, path } of checkouts) {
    harness.log(`${name}: the eviction's cost per operation…`)
    ops.push(await perOperation(path, args.operations, quick ? 1 : 3))
  }

  harness.pinSelf()
  const running: harness.ServerProcess[] = []
  try {
    for (const { name, path } of checkouts) {
      const database = { sqlite: await seededCopy(1_000, `auth-flood-${name}`) }
      const env = harness.serviceEnv(key, database, {
        PETSTORE_TRUSTED_PROXIES: '127.0.0.1',
        PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '5000',
      })
      running.push(await harness.startService(name, env, { checkout: path }))
    }
    const turns: Turn[][] = checkouts.map(() => [])
    for (let round = 0; round < args.rounds; round++) {
      for (let i = 0; i < running.length; i++) {
        const at = (i + round) % running.length
        const server = running[at] as harness.ServerProcess
        harness.log(`round ${round + 1}: ${server.name}…`)
        const figures = await turn(server, settings)
        turns[at]?.push(figures)
        const { quiet: q, flooded: f } = figures
        harness.log(
          `  alone p50 ${q.p50.toFixed(2)} p99 ${q.p99.toFixed(2)} ms ${Math.round(q.rps)} req/s; flood p50 ${f.p50.toFixed(2)} p99 ${f.p99.toFixed(2)} ms ${Math.round(f.rps)} req/s; ${Math.round(figures.floodPerSecond)} failures/s; filled in ${figures.fillSeconds.toFixed(1)} s; load core ${Math.round(figures.loadCoreBusy * 100)}%`,
        )
      }
    }
    const markdown = report(
      args,
      checkouts.map(({ name }, i) => ({
        name,
        turns: turns[i] ?? [],
        ops: ops[i] as PerOperation,
      })),
    )
    writeFileSync(join(harness.BENCH_DIR, 'auth-flood.md'), `${markdown}\n`)
    harness.log(`\n${markdown}`)
  } finally {
    await harness.stopAll(running)
  }
}
