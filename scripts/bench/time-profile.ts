// npm run bench -- time-profile: where a request's time goes, in the service and in the framework
// floor (fastify-floor.ts: bare Fastify doing the same SQL and bytes) under the same load, so that
// the service's cost over the floor is accounted for in time, not only in instructions
// (instructions.ts). Each server runs with V8's perf map (--perf-basic-prof) under
// `perf record -e cpu-clock -g` (time samples: these machines have no hardware counters) while
// wrk drives one operation. Each sample goes to one concern: the kernel's part by the system call
// it is in, else the innermost stack frame of the project's own code or of a named library, else
// V8 and Node.js outside any JavaScript (GC, the event loop). Samples are turned into µs a request
// with the process's CPU time and wrk's count, so each server's rows add up to its whole CPU time
// a request, and the differences to the service's cost over the floor. Function-call IPIs a
// request (/proc/interrupts, CAL) are counted too: waking a load generator that sleeps on the
// other vCPU is a hypervisor exit, charged to the response's write(2), and more of them fall to a
// slower server (docs/benchmarks.md, "Where the time goes").
import { execFile, spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs, promisify } from 'node:util'
import { generateApiKey } from '../../src/contract/api-key.ts'
import * as harness from './harness.ts'
import { seededCopy } from './seed.ts'

export const usage = `[--only get,list20,create,createKeyed] [--seconds 8] [--connections 50]
      [--out <path without .md>]   time per request by concern, the service beside the
      framework floor, under perf's cpu-clock sampling (needs perf, Debian's linux-perf)`

const PERF = '/usr/bin/perf'
/** Samples a second: enough for a stable share at ~20,000 requests a second, little overhead. */
const FREQUENCY = 4999
const PETS = 1_000_000

/**
 * V8's perf map for perf script (/tmp/perf-<pid>.map, removed after the run); with it V8 also
 * writes a log of its own, sent to .bench rather than the servers' working folder.
 */
const PERF_MAP = (name: string) => [
  '--perf-basic-prof',
  '--no-logfile-per-isolate',
  `--logfile=${join(harness.BENCH_DIR, `time-${name}-v8.log`)}`,
]

type ServerName = 'service' | 'floor'

interface Profile {
  rps: number
  cpuUsPerRequest: number
  ipisPerRequest: number
  /** Concern → µs a request. */
  concerns: Map<string, number>
  /** Function (the sample's innermost frame) → µs a request. */
  functions: Map<string, number>
}

export async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      only: { type: 'string' },
      seconds: { type: 'string' },
      connections: { type: 'string' },
      out: { type: 'string' },
    },
  })
  requirePerf()
  harness.requireWrk()
  const seconds = Number(values.seconds ?? 8)
  const connections = Number(values.connections ?? 50)
  const operations = harness.selectOperations(PETS, values.only ?? 'get,list20,create,createKeyed')
  const key = generateApiKey('production')
  const started = performance.now()
  const db = await seededCopy(PETS, `time-${PETS}`)
  harness.pinSelf()
  const running: harness.ServerProcess[] = []
  const keep = harness.keeper(running)
  const results: { label: string; service: Profile; floor: Profile }[] = []
  try {
    const servers: Record<ServerName, harness.ServerProcess> = {
      service: await keep(
        harness.startService('service', harness.serviceEnv(key, { sqlite: db }), {
          nodeArgs: PERF_MAP('service'),
        }),
      ),
      floor: await keep(
        harness.startServer(
          'framework floor',
          [...PERF_MAP('floor'), join(harness.ROOT, 'scripts/bench/fastify-floor.ts'), db],
          { BENCH_AUTHORIZATION: `Bearer ${key}` },
          '/',
        ),
      ),
    }
    for (const operation of operations) {
      const profiles = {} as Record<ServerName, Profile>
      for (const name of ['service', 'floor'] as const) {
        const load = { server: servers[name], key, request: operation.request, connections }
        await harness.runWrk(load, 2) // warm-up: optimised code, a filled page cache
        profiles[name] = await profile(load, seconds)
        harness.log(
          `${operation.id} ${name}: ${harness.int(profiles[name].rps)} req/s, ${profiles[name].cpuUsPerRequest.toFixed(1)} µs CPU a request, ${profiles[name].ipisPerRequest.toFixed(2)} IPIs a request`,
        )
      }
      results.push({ label: operation.label, service: profiles.service, floor: profiles.floor })
    }
  } finally {
    await harness.stopAll(running)
    for (const { pid } of running) rmSync(`/tmp/perf-${pid}.map`, { force: true })
  }
  const durationSeconds = Math.round((performance.now() - started) / 1000)
  const markdown = report(results, { seconds, connections, durationSeconds })
  const figures = { durationSeconds, results: results.map(plain) }
  harness.writeReport(
    values.out ?? join(harness.ROOT, 'docs/benchmarks'),
    'bench-time',
    figures,
    markdown,
  )
}

function requirePerf(): void {
  const probe = spawnSync(PERF, ['record', '-e', 'cpu-clock', '-o', '/dev/null', 'true'], {
    encoding: 'utf8',
  })
  if (probe.error !== undefined || probe.status !== 0) {
    process.stderr.write(
      'npm run bench -- time-profile needs perf with cpu-clock sampling (Debian: apt-get install linux-perf; as root, or kernel.perf_event_paranoid ≤ 1)\n',
    )
    process.exit(1)
  }
}

/** One server under wrk for `seconds`, sampled by perf; its time a request by concern. */
async function profile(load: harness.Load, seconds: number): Promise<Profile> {
  const data = join(harness.BENCH_DIR, `time-${load.server.pid}.perf`)
  const perf = spawn(
    PERF,
    [
      'record',
      '-e',
      'cpu-clock',
      '-F',
      String(FREQUENCY),
      '-g',
      '-p',
      String(load.server.pid),
      '-o',
      data,
    ],
    { stdio: 'ignore' },
  )
  // perf attaches within a few ms; a short pause keeps the first requests inside its window.
  await new Promise((resolve) => setTimeout(resolve, 300))
  const cpuBefore = harness.cpuSeconds(load.server.pid)
  const ipisBefore = functionCallInterrupts()
  const summary = await harness.runWrk(load, seconds)
  const cpu = harness.cpuSeconds(load.server.pid) - cpuBefore
  const ipis = functionCallInterrupts() - ipisBefore
  perf.kill('SIGINT')
  await once(perf, 'exit')
  const { stdout } = await promisify(execFile)(PERF, ['script', '-i', data, '-F', 'ip,sym,dso'], {
    maxBuffer: 1 << 30,
  })
  rmSync(data, { force: true })
  const cpuUsPerRequest = (cpu * 1e6) / summary.requests
  const inUs = (shares: Map<string, number>) =>
    new Map([...shares].map(([name, share]) => [name, share * cpuUsPerRequest]))
  return {
    rps: summary.requests / (summary.durationUs / 1e6),
    cpuUsPerRequest,
    ipisPerRequest: ipis / summary.requests,
    concerns: inUs(shares(stdout, concernOf)),
    functions: inUs(shares(stdout, functionOf)),
  }
}

/** Function-call inter-processor interrupts so far, on every CPU (the CAL line). */
function functionCallInterrupts(): number {
  const line = readFileSync('/proc/interrupts', 'utf8')
    .split('\n')
    .find((l) => l.trimStart().startsWith('CAL:'))
  if (line === undefined) return 0
  return line
    .trim()
    .split(/\s+/)
    .slice(1)
    .filter((field) => /^\d+$/.test(field))
    .reduce((sum, field) => sum + Number(field), 0)
}

/** Each concern's share of the samples in `perf script -F ip,sym,dso` output. */
export function concernShares(script: string): Map<string, number> {
  return shares(script, concernOf)
}

/** The share of the samples each name `nameOf` gives a stack has. */
function shares(script: string, nameOf: (stack: readonly Frame[]) => string): Map<string, number> {
  const counts = new Map<string, number>()
  let total = 0
  for (const stack of stacks(script)) {
    const name = nameOf(stack)
    counts.set(name, (counts.get(name) ?? 0) + 1)
    total++
  }
  return new Map([...counts].map(([name, count]) => [name, count / total]))
}

/**
 * The function a sample's time is given to: its innermost frame, a JavaScript one by its name and
 * file (without the folders), a kernel one marked so.
 */
export function functionOf(stack: readonly Frame[]): string {
  const leaf = stack[0]
  if (leaf === undefined) return '(no frame)'
  const symbol = leaf.symbol.replace(/\+0x[0-9a-f]+$/, '')
  if (leaf.kernel) return `kernel: ${symbol}`
  const js = /^JS:[*~^]?(\S*)\s+(?:file:\/\/)?(\S+?):(\d+):\d+$/.exec(symbol)
  if (js === null) return symbol
  const file = (js[2] ?? '')
    .replace(/^.*\/node_modules\//, '')
    .replace(/^.*\/(src|scripts)\//, '$1/')
  return `${js[1] || '(anonymous)'} ${file}:${js[3]}`
}

interface Frame {
  symbol: string
  kernel: boolean
}

/** The samples' stacks, leaf first. */
function* stacks(script: string): Generator<Frame[]> {
  let stack: Frame[] = []
  for (const line of script.split('\n')) {
    const text = line.trim()
    if (text === '') {
      if (stack.length > 0) yield stack
      stack = []
      continue
    }
    // "ffffffff8a2b… symbol+0x12 ([kernel.kallsyms])"
    const match = /^[0-9a-f]+\s+(.*?)\s+\((.*)\)$/.exec(text)
    if (match === null) continue
    stack.push({ symbol: match[1] ?? '', kernel: (match[2] ?? '').includes('kernel') })
  }
  if (stack.length > 0) yield stack
}

/** A JavaScript frame's file, from V8's perf map name ("JS:*fn file:///…/x.ts:1:2"). */
function jsFile(symbol: string): string | undefined {
  if (!symbol.startsWith('JS:')) return undefined
  return /\s(?:file:\/\/)?(\S+?):\d+:\d+$/.exec(symbol)?.[1]
}

/** The concern a sample's time is given to (see the file's head). */
export function concernOf(stack: readonly Frame[]): string {
  const leaf = stack[0]
  if (leaf?.kernel) {
    const symbols = stack.map((frame) => frame.symbol)
    if (symbols.some((s) => s.startsWith('sock_write_iter') || s.startsWith('tcp_sendmsg'))) {
      return "kernel: the response's write (loopback, waking the client)"
    }
    if (symbols.some((s) => s.startsWith('entry_SYSCALL'))) return 'kernel: other system calls'
    return 'kernel: interrupts and scheduling'
  }
  for (const frame of stack) {
    const file = jsFile(frame.symbol)
    if (file === undefined) continue
    const ours = /\/src\/(.+)$/.exec(file)
    if (ours !== null && !file.includes('/node_modules/')) return `src/${ours[1]}`
    if (file.includes('/scripts/bench/')) return "the floor's own code (scripts/bench)"
    const library = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\/(.*)$/.exec(file)
    if (library !== null) {
      return library[1] === 'fastify' ? `fastify/${library[2]}` : `${library[1]}`
    }
    if (file.startsWith('node:')) return 'node.js (its JavaScript)'
  }
  return 'V8 and Node.js outside JavaScript (GC, event loop, native)'
}

function plain(result: { label: string; service: Profile; floor: Profile }) {
  const side = (p: Profile) => ({
    ...p,
    concerns: Object.fromEntries(p.concerns),
    // The functions that hold at least 0.05 µs a request, enough to find what moved.
    functions: Object.fromEntries([...p.functions].filter(([, us]) => us >= 0.05)),
  })
  return { label: result.label, service: side(result.service), floor: side(result.floor) }
}

/** The Markdown: per operation, each concern's µs a request, service and floor, rows by difference. */
function report(
  results: { label: string; service: Profile; floor: Profile }[],
  run: { seconds: number; connections: number; durationSeconds: number },
): string {
  const us = (n: number | undefined) => (n === undefined || n < 0.005 ? '' : n.toFixed(2))
  const lines = [
    `Run of ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC (${run.durationSeconds} s): ${run.connections} connections, ${run.seconds} s per server and operation after 2 s of warm-up, one after the other; ${FREQUENCY} samples a second of \`perf record -e cpu-clock -g\`, which costs the servers some time of its own (their CPU a request is higher here than in the main run).`,
    '',
  ]
  for (const { label, service, floor } of results) {
    const names = [...new Set([...service.concerns.keys(), ...floor.concerns.keys()])]
    const difference = (name: string) =>
      (service.concerns.get(name) ?? 0) - (floor.concerns.get(name) ?? 0)
    names.sort((a, b) => difference(b) - difference(a))
    lines.push(
      `**${label}**: service ${harness.int(service.rps)} req/s, floor ${harness.int(floor.rps)} (${harness.times(service.rps / floor.rps)}); CPU a request ${service.cpuUsPerRequest.toFixed(1)} / ${floor.cpuUsPerRequest.toFixed(1)} µs; function-call IPIs a request ${service.ipisPerRequest.toFixed(2)} / ${floor.ipisPerRequest.toFixed(2)}.`,
      '',
      '| Concern (µs a request) | service | floor | difference |',
      '|---|--:|--:|--:|',
      ...names
        .filter(
          (name) => Math.abs(difference(name)) >= 0.05 || (service.concerns.get(name) ?? 0) >= 0.5,
        )
        .map(
          (name) =>
            `| ${name} | ${us(service.concerns.get(name))} | ${us(floor.concerns.get(name))} | ${difference(name) >= 0 ? '+' : ''}${difference(name).toFixed(2)} |`,
        ),
      `| *the rest, under 0.05 µs each* | ${rest(service, floor, names, true)} | ${rest(service, floor, names, false)} | |`,
      `| **all of it** | **${service.cpuUsPerRequest.toFixed(2)}** | **${floor.cpuUsPerRequest.toFixed(2)}** | **+${(service.cpuUsPerRequest - floor.cpuUsPerRequest).toFixed(2)}** |`,
      '',
      ...functionRows(service, floor),
      '',
    )
  }
  return lines.join('\n')
}

/** How many functions the by-function table shows: those the service spends most more time in. */
const FUNCTION_ROWS = 15

/** The functions (innermost frames) whose time differs most, the service's extra first. */
function functionRows(service: Profile, floor: Profile): string[] {
  const names = [...new Set([...service.functions.keys(), ...floor.functions.keys()])]
  const difference = (name: string) =>
    (service.functions.get(name) ?? 0) - (floor.functions.get(name) ?? 0)
  names.sort((a, b) => difference(b) - difference(a))
  const us = (n: number | undefined) => (n === undefined || n < 0.005 ? '' : n.toFixed(2))
  return [
    `<details><summary>By function: the ${FUNCTION_ROWS} that cost the service most over the floor</summary>`,
    '',
    '| Function (innermost frame; µs a request) | service | floor | difference |',
    '|---|--:|--:|--:|',
    ...names
      .slice(0, FUNCTION_ROWS)
      .map(
        (name) =>
          `| \`${name.replaceAll('|', '\\|').replaceAll('`', "'")}\` | ${us(service.functions.get(name))} | ${us(floor.functions.get(name))} | +${difference(name).toFixed(2)} |`,
      ),
    '',
    '</details>',
  ]
}

/** The µs a request of the concerns left out of the table, so that the rows add up to the whole. */
function rest(service: Profile, floor: Profile, names: string[], ofService: boolean): string {
  const shown = names.filter(
    (name) =>
      Math.abs((service.concerns.get(name) ?? 0) - (floor.concerns.get(name) ?? 0)) >= 0.05 ||
      (service.concerns.get(name) ?? 0) >= 0.5,
  )
  const side = ofService ? service : floor
  const left = [...side.concerns].filter(([name]) => !shown.includes(name))
  return left.reduce((sum, [, value]) => sum + value, 0).toFixed(2)
}
