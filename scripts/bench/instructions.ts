// `npm run bench -- instructions`: instructions per request, a server run under valgrind's
// callgrind, which counts what the process executes in user space (not the kernel's work for its
// sockets and fsyncs). Where two runs of the same code differ by 10–15% in CPU time on a shared
// virtual machine, the count repeats within ~2%, so a change worth 2–3% of a request can be seen.
// It says nothing of waiting (locks, fsync, the network): pair it with the main run.
//
// Each server runs on its own copy of the seed, started with instrumentation off, warmed up
// (20,000 requests: after 3,000, V8 was still compiling, and half of a getPet's count was its
// compilers and lower tiers), counted over --requests requests on the warm-up's 10 keep-alive
// connections (one request in flight each), then stopped; two servers at a time, one per core.
// --checkout: another checkout's service too. --ref: a reference of scripts/bench (`:logged`, its
// Fastify with a logger at warn, as the service runs). --by-function:
// where the instructions go (callgrind-functions.ts), each service against the first --ref, by
// concern (self, and with V8's builtins and runtime charged to their callers) and by function,
// rows adding up to the total. --postgres: on a new database of --pets pets on the test server,
// pool size 10, straight to the server (the reference is then same-bytes-postgres). --keep <dir>:
// callgrind's files and perf maps kept there, for callgrind_annotate.
import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { Agent } from 'node:http'
import { tmpdir } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { parseArgs, promisify } from 'node:util'
import { generateApiKey } from '../../src/contract/api-key.ts'
import { freePort } from '../../test/helpers/free-port.ts'
import * as callgrind from './callgrind-functions.ts'
import * as harness from './harness.ts'
import { POOL_SIZE, withSeededDatabase } from './postgres.ts'
import { removeDatabase, seededCopy } from './seed.ts'

export const usage = `[--only get,list20,create,createKeyed] [--checkout <dir>]…
      [--ref same-bytes] [--ref fastify-floor[:logged]] [--requests 2000] [--warmup 20000]
      [--env NAME=VALUE]… [--by-function] [--cache-sim] [--postgres [--pets 100000]]
      [--keep <dir>]   instructions per request under valgrind's callgrind`

const CONNECTIONS = 10

function parse(argv: string[]) {
  const text = { type: 'string' } as const
  const many = { type: 'string', multiple: true, default: [] as string[] } as const
  const flag = { type: 'boolean', default: false } as const
  const options = {
    only: { ...text, default: 'get,list20,create,createKeyed' },
    requests: { ...text, default: '2000' },
    warmup: { ...text, default: '20000' },
    ...{ checkout: many, ref: many, env: many, pets: text, keep: text },
    ...{ 'by-function': flag, 'cache-sim': flag, postgres: flag },
  }
  const { values } = parseArgs({ args: argv, options })
  return { ...values, pets: Number(values.pets ?? (values.postgres ? 100_000 : 1_000_000)) }
}

type Options = ReturnType<typeof parse>

/** A server to count: the service of a checkout, or a reference script. */
interface Subject {
  label: string
  /** The node script and its arguments, after the node flags. */
  script: (db: string) => string[]
  env: (database: harness.Database) => Record<string, string>
  readyPath: string
}

function service(checkout: string, key: string, extraEnv: Record<string, string>): Subject {
  // Load shedding on, so that its hook runs, at 60 s: never shedding, though valgrind slows the
  // process ~50×.
  const settings = { PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '60000', ...extraEnv }
  return {
    label: checkout === harness.ROOT ? 'this checkout' : basename(checkout),
    script: () => [join(checkout, 'bin/petstore.js'), 'serve'],
    env: (database) => harness.serviceEnv(key, database, settings),
    readyPath: '/readyz',
  }
}

/** `name` is a script of scripts/bench, `:logged` after it a pino logger at warn (the floor's). */
function reference(name: string, key: string): Subject {
  // same-bytes-postgres.ts: the service's pool, straight to the server, pg, plain creates.
  const env = { DATABASE_POOL_SIZE: String(POOL_SIZE), DATABASE_POOLER: 'none', BENCH_DRIVER: 'pg' }
  const [script, variant] = name.split(':')
  if (variant !== undefined && variant !== 'logged') throw new Error(`--ref ${name}: only :logged`)
  const logger: Record<string, string> = variant === 'logged' ? { BENCH_LOGGER: 'warn' } : {}
  return {
    label: name,
    script: (db) => [join(harness.ROOT, `scripts/bench/${script}.ts`), db],
    env: () => ({
      BENCH_AUTHORIZATION: `Bearer ${key}`,
      ...env,
      ...logger,
      BENCH_KEYED: 'ignored',
    }),
    readyPath: '/',
  }
}

/**
 * `count` requests, CONNECTIONS at a time on `agent`'s keep-alive connections (the same ones
 * for the warm-up and the count, so that no connection opens or closes while counting); the
 * number answered other than 2xx.
 */
async function send(
  url: string,
  key: string,
  operation: harness.Operation,
  count: number,
  agent: Agent,
) {
  let sent = 0
  let failed = 0
  const one = async (): Promise<void> => {
    while (sent < count) {
      sent++
      const { status } = await harness.fetchAnswer(key, url, operation.request, agent)
      if (status < 200 || status >= 300) failed++
    }
  }
  await Promise.all(Array.from({ length: CONNECTIONS }, one))
  return failed
}

interface Count {
  perRequest: number
  /** --cache-sim: callgrind's simulated cache events a request (I1mr, D1mr, D1mw, ILmr, DLmr, DLmw, Dr, Dw). */
  misses?: Map<string, number>
  /** --by-function: instructions by function over the counted requests, self and charged. */
  self?: Map<string, number>
  charged?: Map<string, number>
}

/** valgrind's arguments, then node's, for one server (--by-function: V8's perf map too). */
function valgrindArgs(args: Options, out: string, dir: string, script: string[]): string[] {
  const byFunction = args['by-function']
  return [
    ...['--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${out}`],
    ...(byFunction ? ['--dump-instr=yes', '--compress-strings=no', '--compress-pos=no'] : []),
    ...(args['cache-sim'] ? ['--cache-sim=yes'] : []),
    process.execPath,
    // Given here, so that bin/petstore.js does not re-execute itself with it, out of valgrind.
    '--max-semi-space-size=4',
    // /tmp/perf-<pid>.map: V8's generated code by address (no code compaction with it). Its log
    // of code events too, kept out of the working directory.
    ...(byFunction
      ? ['--perf-basic-prof', '--interpreted-frames-native-stack', '--no-logfile-per-isolate']
      : []),
    ...(byFunction ? [`--logfile=${join(dir, 'v8.log')}`] : []),
    ...script,
  ]
}

/** Instructions per request of one operation on one server. */
async function count(args: Options, key: string, job: Job, postgresUrl?: string): Promise<Count> {
  const { subject, operation } = job
  const dir = mkdtempSync(join(tmpdir(), 'petstore-instructions-'))
  const name = `instructions-${process.pid}-${operation.id}-${subject.label}`
  const db = postgresUrl ?? (await seededCopy(args.pets, name))
  const port = await freePort()
  const out = join(dir, 'callgrind.out')
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS })
  // valgrind and callgrind_control find each other by a name made of USER and HOST.
  const pipeEnv = { USER: 'petstore', HOST: '127.0.0.1' }
  const database = postgresUrl ? { url: postgresUrl, poolSize: POOL_SIZE } : { sqlite: db }
  const env = {
    ...{ PATH: process.env.PATH ?? '', DATABASE_URL: postgresUrl ?? `sqlite:${db}` },
    ...{ PORT: String(port), ...subject.env(database), ...pipeEnv },
  }
  const child = spawn('valgrind', valgrindArgs(args, out, dir, subject.script(db)), {
    env,
    stdio: 'ignore',
  })
  const perfMap = `/tmp/perf-${child.pid}.map`
  try {
    const url = `http://127.0.0.1:${port}`
    await harness.waitUntilReady(url + subject.readyPath, child, 300_000, () => subject.label)
    const warmupFailed = await send(url, key, operation, Number(args.warmup), agent)
    const control = (flag: string) =>
      promisify(execFile)('callgrind_control', [flag, String(child.pid)], {
        env: { ...process.env, ...pipeEnv },
      })
    await control('--instr=on')
    const requests = Number(args.requests)
    const failed = await send(url, key, operation, requests, agent)
    await control('--dump')
    if (failed + warmupFailed > 0) throw new Error(`${failed + warmupFailed} answers were not 2xx`)
    if (args.keep !== undefined) {
      const to = join(args.keep, `${operation.id}-${basename(subject.label)}`)
      copyFileSync(`${out}.1`, `${to}.callgrind`)
      if (args['by-function']) copyFileSync(perfMap, `${to}.perf-map`)
    }
    if (args['by-function']) {
      const { costs, callers, total } = await callgrind.selfCosts(`${out}.1`, perfMap)
      const attributed = [...costs.values()].reduce((a, b) => a + b, 0)
      if (attributed !== total) throw new Error(`functions add up to ${attributed}, not ${total}`)
      const charged = callgrind.chargedToCallers(costs, callers)
      return { perRequest: total / requests, self: costs, charged }
    }
    const events = callgrindEvents(readFileSync(`${out}.1`, 'utf8'))
    const perRequest = (events.get('Ir') ?? Number.NaN) / requests
    if (!args['cache-sim']) return { perRequest }
    return {
      perRequest,
      misses: new Map(
        [...events].filter(([name]) => name !== 'Ir').map(([n, v]) => [n, v / requests]),
      ),
    }
  } finally {
    agent.destroy()
    child.kill('SIGKILL')
    await once(child, 'exit')
    rmSync(dir, { recursive: true, force: true })
    rmSync(perfMap, { force: true })
    if (postgresUrl === undefined) removeDatabase(db)
  }
}

type Job = { operation: harness.Operation; subject: Subject }

/** Every job counted, two at a time, one per core: the counts do not depend on what else runs. */
async function countAll(args: Options, key: string, jobs: Job[], postgresUrl?: string) {
  const results = new Map<Job, Count>()
  const queue = [...jobs]
  const worker = async () => {
    for (let job = queue.shift(); job !== undefined; job = queue.shift()) {
      const result = await count(args, key, job, postgresUrl)
      results.set(job, result)
      const line = `${job.operation.id}, ${job.subject.label}: ${Math.round(result.perRequest)}`
      process.stderr.write(`${line}\n`)
    }
  }
  await Promise.all([worker(), worker()])
  return results
}

/** The totals of a callgrind file by event (Ir alone, or with --cache-sim its cache events). */
function callgrindEvents(file: string): Map<string, number> {
  const names = /^events: (.+)$/m.exec(file)?.[1]?.split(' ')
  const totals = /^summary: (.+)$/m.exec(file)?.[1]?.split(' ')
  if (names === undefined || totals === undefined) throw new Error('callgrind wrote no summary')
  return new Map(names.map((name, i) => [name, Number(totals[i])]))
}

/** --by-function: each service against the first reference, by concern and by function. */
function byFunctionTables(jobs: Job[], results: Map<Job, Count>, references: Subject[], n: number) {
  const [reference] = references
  const counts = { service: n, reference: n }
  if (reference === undefined) return
  for (const id of new Set(jobs.map((job) => job.operation.id))) {
    const ofId = jobs.filter((job) => job.operation.id === id)
    const theirs = results.get(ofId.find((job) => job.subject === reference) as Job)
    for (const job of ofId) {
      const ours = results.get(job)
      if (references.includes(job.subject) || !ours?.self || !ours.charged) continue
      if (!theirs?.self || !theirs.charged) continue
      const table = (title: string, a: Map<string, number>, b: Map<string, number>, top = 60) => {
        const rows = callgrind.differenceTable(a, b, counts, top, title, callgrind.shortName)
        const vs = `${id}: ${job.subject.label} against ${reference.label}`
        process.stdout.write(`\n### ${vs}, ${title}\n\n${rows}`)
      }
      const { byConcern } = callgrind
      table('by concern, self', byConcern(ours.self), byConcern(theirs.self))
      table('by concern, charged', byConcern(ours.charged), byConcern(theirs.charged))
      table('by function, charged', ours.charged, theirs.charged, 40)
    }
  }
}

export async function main(argv: string[]): Promise<void> {
  const args = parse(argv)
  const key = generateApiKey('production')
  const extraEnv = harness.envSettings(args.env)
  const references = args.ref.map((name) => reference(name, key))
  const subjects = [
    ...[harness.ROOT, ...args.checkout.map((dir) => resolve(dir))].map((dir) =>
      service(dir, key, extraEnv),
    ),
    ...references,
  ]
  const jobs = harness
    .selectOperations(args.pets, args.only)
    .flatMap((operation) => subjects.map((subject) => ({ operation, subject })))
  const results = args.postgres
    ? await withSeededDatabase('petstore_instructions', args.pets, (url) =>
        countAll(args, key, jobs, url),
      )
    : await countAll(args, key, jobs)
  process.stdout.write('| Operation | Server | Instructions per request |\n|---|---|--:|\n')
  for (const job of jobs) {
    const perRequest = Math.round(results.get(job)?.perRequest ?? Number.NaN).toLocaleString('en')
    process.stdout.write(`| ${job.operation.id} | ${job.subject.label} | ${perRequest} |\n`)
  }
  if (args['cache-sim'] && !args['by-function']) cacheTable(jobs, results)
  if (args['by-function']) byFunctionTables(jobs, results, references, Number(args.requests))
}

/** --cache-sim: the simulated cache's misses a request, first level (I1, D1) and last (LL). */
function cacheTable(jobs: Job[], results: Map<Job, Count>): void {
  const columns = ['Dr', 'Dw', 'I1mr', 'D1mr', 'D1mw', 'ILmr', 'DLmr', 'DLmw']
  process.stdout.write(
    `\n| Operation | Server | ${columns.join(' | ')} |\n|---|---|${columns.map(() => '--:').join('|')}|\n`,
  )
  for (const job of jobs) {
    const misses = results.get(job)?.misses
    const cells = columns.map((name) =>
      Math.round(misses?.get(name) ?? Number.NaN).toLocaleString('en'),
    )
    process.stdout.write(`| ${job.operation.id} | ${job.subject.label} | ${cells.join(' | ')} |\n`)
  }
}
