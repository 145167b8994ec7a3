// Instructions per request: a server run under valgrind's callgrind, which counts the
// instructions the process executes in user space (the kernel's work for its sockets and fsyncs
// is not counted). Unlike CPU time on a shared virtual machine, where two runs of the same code
// differ by 10–15%, the count repeats within ~2%, so a change worth 2–3% of a request can be
// seen, and taken back to see what it bought (leave-one-out). It says nothing of waiting (locks,
// fsync, the network): pair it with `npm run bench` for throughput and latency.
//
// Each server runs on its own copy of the 1,000,000-pet seed (run `npm run bench -- --quick`
// once to make it): started with instrumentation off, warmed up (20,000 requests: after 3,000,
// V8 was still compiling, and half of a getPet's count was its compilers and lower tiers),
// counted over `--requests` requests on the warm-up's 10 keep-alive connections (one request in
// flight each), then stopped. The service runs as `serve` does, at LOG_LEVEL=warn with metrics
// on and load shedding on at 60 s (on, so its hook runs; never shedding, though valgrind slows
// the process ~50×).
//
//   node scripts/bench/instructions.ts [--only get,list20,create,createKeyed]
//        [--checkout <dir>]… [--ref same-bytes] [--ref fastify-floor]
//        [--requests 2000] [--warmup 20000] [--env NAME=VALUE]…
//        [--by-function [--cache-sim]] [--postgres [--pets 100000]]
//
// --checkout: the service of another checkout too (e.g. a commit before a change, or one with
// a change taken back), measured beside this one. --ref: a reference of scripts/bench.
// --env: a setting for every service measured, e.g. METRICS_PORT=off. Needs valgrind
// (`apt-get install valgrind`); servers are measured two at a time, one per core.
// --by-function: where the instructions go (callgrind-functions.ts), each server against the
// first --ref, in instructions per request: by concern (self, and with V8's builtins and runtime
// charged to their callers) and by function (charged), rows adding up to the total. --cache-sim adds callgrind's cache simulation (slower; the instruction counts are the
// same). --postgres: on a new PostgreSQL database of --pets pets (test/helpers/postgres.ts's
// server, seeded as postgres.ts seeds, dropped afterwards), pool size 10, straight to the server;
// the reference is then `--ref same-bytes-postgres`. --keep <dir>: callgrind's files (and perf
// maps) kept there, for callgrind_annotate or a second look.
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { Agent, request as httpRequest } from 'node:http'
import { tmpdir } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs, promisify } from 'node:util'
import { generateApiKey } from '../../src/contract/api-key.ts'
import { freePort } from '../../test/helpers/free-port.ts'
import { ADMIN_URL, onDatabase } from '../../test/helpers/postgres.ts'
import {
  byConcern,
  chargedToCallers,
  differenceTable,
  selfCosts,
  shortName,
} from './callgrind-functions.ts'
import { POOL_SIZE, seed as seedPostgres } from './postgres.ts'
import { seededCopy } from './seed.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const BENCH_DIR = join(ROOT, '.bench')
const CONNECTIONS = 10

const { values: args } = parseArgs({
  options: {
    only: { type: 'string', default: 'get,list20,create,createKeyed' },
    checkout: { type: 'string', multiple: true, default: [] },
    ref: { type: 'string', multiple: true, default: [] },
    requests: { type: 'string', default: '2000' },
    warmup: { type: 'string', default: '20000' },
    env: { type: 'string', multiple: true, default: [] },
    'by-function': { type: 'boolean', default: false },
    'cache-sim': { type: 'boolean', default: false },
    postgres: { type: 'boolean', default: false },
    pets: { type: 'string' },
    keep: { type: 'string' },
  },
})
const PETS = Number(args.pets ?? (args.postgres ? 100_000 : 1_000_000))
const byFunction = args['by-function']

interface Operation {
  method: 'GET' | 'POST'
  path: string
  body?: string
  /** A new Idempotency-Key on every request. */
  keyed?: boolean
}

const body = JSON.stringify({ name: 'Benchmark Bella', categoryId: 42, status: 'available' })
const operations: Record<string, Operation> = {
  get: { method: 'GET', path: `/v1/pets/${PETS / 2}` },
  list20: { method: 'GET', path: '/v1/pets?limit=20' },
  list100: { method: 'GET', path: '/v1/pets?limit=100' },
  status: { method: 'GET', path: '/v1/pets?limit=20&status=available' },
  create: { method: 'POST', path: '/v1/pets', body },
  createKeyed: { method: 'POST', path: '/v1/pets', body, keyed: true },
}

/** A server to count: the service of a checkout, or a reference script. */
interface Subject {
  label: string
  /** The node script and its arguments, after the node flags. */
  script(db: string): string[]
  env: Record<string, string>
  readyPath: string
}

const key = generateApiKey('production')
const extraEnv = Object.fromEntries(
  args.env.map((setting) => {
    const at = setting.indexOf('=')
    if (at < 1) throw new Error(`--env takes NAME=VALUE, not ${setting}`)
    return [setting.slice(0, at), setting.slice(at + 1)]
  }),
)

function service(checkout: string): Subject {
  return {
    label: checkout === ROOT ? 'this checkout' : basename(checkout),
    script: () => [join(checkout, 'bin/petstore.js'), 'serve'],
    env: {
      LOG_LEVEL: 'warn',
      METRICS_PORT: '0',
      PETSTORE_RATE_LIMIT: '0',
      PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '60000',
      PETSTORE_API_KEYS: key,
      ...(args.postgres ? { DATABASE_POOL_SIZE: String(POOL_SIZE) } : {}),
      ...extraEnv,
    },
    readyPath: '/readyz',
  }
}

function reference(name: string): Subject {
  return {
    label: name,
    script: (db) => [join(ROOT, `scripts/bench/${name}.ts`), db],
    env: {
      BENCH_AUTHORIZATION: `Bearer ${key}`,
      // same-bytes-postgres.ts: the service's pool, straight to the server, pg, plain creates.
      DATABASE_POOL_SIZE: String(POOL_SIZE),
      DATABASE_POOLER: 'none',
      BENCH_DRIVER: 'pg',
      BENCH_KEYED: 'ignored',
    },
    readyPath: '/',
  }
}

/**
 * `count` requests, CONNECTIONS at a time on `agent`'s keep-alive connections (the same ones
 * for the warm-up and the count, so that no connection opens or closes while counting); the
 * number answered other than 2xx.
 */
async function send(url: string, operation: Operation, count: number, tag: string, agent: Agent) {
  let sent = 0
  let failed = 0
  const one = async (): Promise<void> => {
    while (sent < count) {
      const n = ++sent
      const headers: Record<string, string> = { authorization: `Bearer ${key}` }
      if (operation.body !== undefined) headers['content-type'] = 'application/json'
      if (operation.keyed) headers['idempotency-key'] = `${tag}-${n}`
      const status = await new Promise<number>((done, fail) => {
        httpRequest(url + operation.path, { method: operation.method, agent, headers }, (res) => {
          res.resume().on('end', () => done(res.statusCode ?? 0))
        })
          .on('error', fail)
          .end(operation.body)
      })
      if (status < 200 || status >= 300) failed++
    }
  }
  await Promise.all(Array.from({ length: CONNECTIONS }, one))
  return failed
}

const run = promisify(execFile)

async function ready(url: string, child: ChildProcess): Promise<void> {
  for (const deadline = Date.now() + 300_000; Date.now() < deadline; ) {
    if (child.exitCode !== null) throw new Error(`the server exited (${child.exitCode})`)
    try {
      const response = await fetch(url)
      await response.body?.cancel()
      if (response.status < 500) return
    } catch {}
    await new Promise((wait) => setTimeout(wait, 500))
  }
  throw new Error('the server was not ready within 5 minutes')
}

interface Count {
  perRequest: number
  /** --by-function: instructions by function over all the counted requests (callgrind-functions.ts). */
  self?: Map<string, number>
  charged?: Map<string, number>
}

/** Instructions per request of one operation on one server. */
async function count(subject: Subject, id: string, operation: Operation): Promise<Count> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-instructions-'))
  const db =
    postgresUrl ?? seededCopy(BENCH_DIR, PETS, `instructions-${process.pid}-${id}-${subject.label}`)
  const port = await freePort()
  const out = join(dir, 'callgrind.out')
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS })
  // valgrind and callgrind_control find each other by a name made of USER and HOST.
  const pipeEnv = { USER: 'petstore', HOST: '127.0.0.1' }
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      `--callgrind-out-file=${out}`,
      ...(byFunction ? ['--dump-instr=yes', '--compress-strings=no', '--compress-pos=no'] : []),
      ...(args['cache-sim'] ? ['--cache-sim=yes'] : []),
      process.execPath,
      // Given here, so that bin/petstore.js does not re-execute itself with it, out of valgrind.
      '--max-semi-space-size=4',
      // /tmp/perf-<pid>.map: V8's generated code by address (no code compaction with it).
      // Its log of code events too, kept out of the working directory.
      ...(byFunction
        ? [
            '--perf-basic-prof',
            '--interpreted-frames-native-stack',
            '--no-logfile-per-isolate',
            `--logfile=${join(dir, 'v8.log')}`,
          ]
        : []),
      ...subject.script(db),
    ],
    {
      env: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: postgresUrl ?? `sqlite:${db}`,
        PORT: String(port),
        ...subject.env,
        ...pipeEnv,
      },
      stdio: 'ignore',
    },
  )
  try {
    const url = `http://127.0.0.1:${port}`
    await ready(url + subject.readyPath, child)
    const tag = `instructions-${process.pid}-${Date.now()}`
    const warmupFailed = await send(url, operation, Number(args.warmup), `${tag}-w`, agent)
    const control = (flag: string) =>
      run('callgrind_control', [flag, String(child.pid)], { env: { ...process.env, ...pipeEnv } })
    await control('--instr=on')
    const failed = await send(url, operation, Number(args.requests), `${tag}-m`, agent)
    await control('--dump')
    if (failed + warmupFailed > 0) throw new Error(`${failed + warmupFailed} answers were not 2xx`)
    if (args.keep !== undefined) {
      const to = join(args.keep, `${id}-${basename(subject.label)}`)
      copyFileSync(`${out}.1`, `${to}.callgrind`)
      if (byFunction) copyFileSync(`/tmp/perf-${child.pid}.map`, `${to}.perf-map`)
    }
    if (byFunction) {
      const { costs, callers, total } = await selfCosts(`${out}.1`, `/tmp/perf-${child.pid}.map`)
      const attributed = [...costs.values()].reduce((a, b) => a + b, 0)
      if (attributed !== total) throw new Error(`functions add up to ${attributed}, not ${total}`)
      const charged = chargedToCallers(costs, callers)
      return { perRequest: total / Number(args.requests), self: costs, charged }
    }
    const summary = /^summary: (\d+)$/m.exec(readFileSync(`${out}.1`, 'utf8'))
    if (summary === null) throw new Error('callgrind wrote no summary')
    return { perRequest: Number(summary[1]) / Number(args.requests) }
  } finally {
    agent.destroy()
    child.kill('SIGKILL')
    await once(child, 'exit')
    rmSync(dir, { recursive: true, force: true })
    rmSync(`/tmp/perf-${child.pid}.map`, { force: true })
    if (postgresUrl === undefined) {
      for (const suffix of ['', '-wal', '-shm']) rmSync(db + suffix, { force: true })
    }
  }
}

let postgresUrl: string | undefined
let postgresName: string | undefined
if (args.postgres) {
  postgresName = `petstore_instructions_${randomBytes(6).toString('hex')}`
  const name = postgresName
  await onDatabase(ADMIN_URL, (client) => client.query(`CREATE DATABASE ${name}`))
  const url = new URL(ADMIN_URL)
  url.pathname = `/${name}`
  postgresUrl = url.toString()
  process.stderr.write(`seeding ${PETS} pets into ${name}\n`)
  await seedPostgres(postgresUrl, PETS)
}

const subjects = [
  service(ROOT),
  ...args.checkout.map((dir) => service(resolve(dir))),
  ...args.ref.map(reference),
]
const jobs = args.only.split(',').flatMap((id) => {
  const operation = operations[id]
  if (operation === undefined) throw new Error(`no operation ${id}`)
  return subjects.map((subject) => ({ id, operation, subject }))
})
const results = new Map<(typeof jobs)[number], Count>()
// Two at a time, one per core: the counts do not depend on what else runs.
const queue = [...jobs]
try {
  await Promise.all(
    [0, 1].map(async () => {
      for (let job = queue.shift(); job !== undefined; job = queue.shift()) {
        const result = await count(job.subject, job.id, job.operation)
        results.set(job, result)
        process.stderr.write(`${job.id}, ${job.subject.label}: ${Math.round(result.perRequest)}\n`)
      }
    }),
  )
} finally {
  const name = postgresName
  if (name !== undefined) {
    await onDatabase(ADMIN_URL, (client) => client.query(`DROP DATABASE ${name} WITH (FORCE)`))
  }
}
process.stdout.write('| Operation | Server | Instructions per request |\n|---|---|--:|\n')
for (const job of jobs) {
  const perRequest = Math.round(results.get(job)?.perRequest ?? Number.NaN).toLocaleString('en')
  process.stdout.write(`| ${job.id} | ${job.subject.label} | ${perRequest} |\n`)
}
if (byFunction) {
  const firstReference = subjects[subjects.length - args.ref.length]
  const requests = Number(args.requests)
  for (const id of new Set(jobs.map((job) => job.id))) {
    const ofId = jobs.filter((job) => job.id === id)
    const reference = ofId.find((job) => job.subject === firstReference)
    const theirs = reference && results.get(reference)
    for (const job of ofId.slice(0, subjects.length - args.ref.length)) {
      const ours = results.get(job)
      if (!ours?.self || !ours.charged || !theirs?.self || !theirs.charged) continue
      const vs = `${id}: ${job.subject.label} against ${reference?.subject.label}`
      const counts = { service: requests, reference: requests }
      const table = (title: string, a: Map<string, number>, b: Map<string, number>, top = 60) =>
        process.stdout.write(
          `\n### ${vs}, ${title}\n\n${differenceTable(a, b, counts, top, title, shortName)}`,
        )
      table('by concern, self', byConcern(ours.self), byConcern(theirs.self))
      table('by concern, charged', byConcern(ours.charged), byConcern(theirs.charged))
      table('by function, charged', ours.charged, theirs.charged, 40)
    }
  }
}
