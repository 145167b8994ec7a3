// npm run fleet: a real fleet on this machine, under the load of our own SDK's users, through
// the faults operators live through, one after another; then what the database holds is checked
// against what every caller was told, and docs/fleet-report.md is written with the figures.
//
// The fleet, each part started the way docs/operations.md and docs/fleet.md tell operators to:
// - PostgreSQL: a private primary and a synchronous streaming replica (postgres-pair.ts);
// - PgBouncer in transaction mode in front of it (test/helpers/pgbouncer.ts);
// - Redis for the rate-limit counts (test/helpers/redis-server.ts);
// - three instances of the service, `serve --workers 2` each, on PgBouncer and Redis;
// - HAProxy 2.6 with docs/fleet.md's configuration, health-checking /readyz (test/helpers/haproxy.ts);
// - tracing on (D23), with the default sampler, to an OTLP/HTTP receiver the run starts; one
//   create is sent with a sampled traceparent after the steady load, and its trace reported.
// Load: 32 SDK users (test/helpers/fleet-users.ts) creating, getting and paging throughout.
//
// Faults, in order, each timed from the fault to full service again (every instance's /readyz
// 200 and a create and a read through the balancer succeeding at the first attempt):
// a rolling restart, a SIGKILL of one instance's primary process, Redis stopped for 10 s,
// PgBouncer killed and started again, a PostgreSQL failover (primary stopped immediately,
// replica promoted, PgBouncer repointed and reloaded), and 2,000 extra connections for 10 s
// while every instance's /healthz is probed on fresh connections.
//
//   npm run fleet                the full run; writes docs/fleet-report.md (about 2 minutes)
//   npm run fleet -- --quick     shorter faults and 500 extra connections; writes nothing
import { execFileSync, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { Petstore } from '../../client/src/index.ts'
import { checkStored, startUsers, type UsersRun } from '../../test/helpers/fleet-users.ts'
import { freePort } from '../../test/helpers/free-port.ts'
import { type BackendStats, type HAProxy, startHAProxy } from '../../test/helpers/haproxy.ts'
import { type OtlpReceiver, startOtlpReceiver } from '../../test/helpers/otlp-receiver.ts'
import { type PgBouncer, startPgBouncer } from '../../test/helpers/pgbouncer.ts'
import { onDatabase } from '../../test/helpers/postgres.ts'
import { type ServiceProcess, startService } from '../../test/helpers/process.ts'
import { type RedisServer, startRedisServer } from '../../test/helpers/redis-server.ts'
import { percentile, requireWrk, wrkVersion } from '../bench/harness.ts'
import { PG_BIN, type PostgresPair, startPostgresPair } from './postgres-pair.ts'
import { probe } from './probe.ts'
import { type FleetReport, type FloodReport, type PhaseReport, renderFleet } from './report.ts'
import { type TraceReport, traceOneCreate } from './trace.ts'

const { values: flags } = parseArgs({ options: { quick: { type: 'boolean', default: false } } })
const QUICK = flags.quick

const INSTANCES = 3
const WORKERS = 2
const USERS = 32
const BASELINE_MS = QUICK ? 2_000 : 5_000
const REDIS_DOWN_MS = QUICK ? 3_000 : 10_000
const OVERLOAD_SECONDS = QUICK ? 4 : 10
const OVERLOAD_CONNECTIONS = QUICK ? 500 : 2_000
/** Kubernetes' default probe timeout: a /healthz slower than this counts as failed. */
const PROBE_TIMEOUT_MS = 1_000
/** A probe gives up after this; one that got no answer at all counts as this long. */
const NO_ANSWER_MS = 5_000
/** How often each probed URL is probed during a flood. */
const PROBE_EVERY_MS = 100
/** After full service, calls that began during the fault have this long to settle into its window. */
const SETTLE_MS = 2_000
/** A fault that does not end in full service within this long fails the run. */
const RECOVERY_DEADLINE_MS = 120_000

interface Fleet {
  pair: PostgresPair
  pgbouncer: PgBouncer
  redis: RedisServer
  receiver: OtlpReceiver
  balancer: HAProxy
  ports: number[]
  /** Each instance's PROBE_PORT (D20). */
  probePorts: number[]
  instances: ServiceProcess[]
  /** Every instance process started in the run, replaced ones too: their logs are read at the end. */
  started: ServiceProcess[]
  key: string
  start(i: number): Promise<ServiceProcess>
}

/** What stops each part started so far, newest first: the run never leaves a server behind. */
const cleanups: Array<() => Promise<unknown>> = []

async function cleanUp(): Promise<void> {
  while (cleanups.length > 0)
    await cleanups
      .pop()?.()
      .catch(() => {})
}

async function buildFleet(): Promise<Fleet> {
  const pair = await startPostgresPair()
  cleanups.push(() => pair.stop())
  await sql(pair.primary.url(), 'CREATE DATABASE petstore')
  // docs/operations.md "Behind PgBouncer": every request is one statement, so the role carries the timeout.
  await sql(pair.primary.url(), `ALTER ROLE postgres SET statement_timeout = '5s'`)
  const pgbouncer = await startPgBouncer({
    poolSize: 20,
    upstream: { host: '127.0.0.1', port: pair.primary.port },
  })
  cleanups.push(() => pgbouncer.stop())
  const redis = await startRedisServer()
  cleanups.push(() => redis.stop())
  const receiver = await startOtlpReceiver()
  cleanups.push(() => receiver.close())
  const key = `fleet-${randomBytes(24).toString('hex')}`
  const ports: number[] = []
  const probePorts: number[] = []
  for (let i = 0; i < INSTANCES; i++) ports.push(await freePort())
  for (let i = 0; i < INSTANCES; i++) probePorts.push(await freePort())
  const started: ServiceProcess[] = []
  const startOne = (i: number) =>
    startService(
      {
        DATABASE_URL: pgbouncer.urlFor('petstore'),
        DATABASE_POOLER: 'transaction',
        REDIS_URL: redis.url,
        // Counted in Redis, never reached: the users share one key.
        PETSTORE_RATE_LIMIT: '1000000',
        PETSTORE_API_KEYS: key,
        // HAProxy's address: the client address logged and counted for failed
        // authentications is read from its X-Forwarded-For (D3, D8).
        PETSTORE_TRUSTED_PROXIES: '127.0.0.1',
        PORT: String(ports[i]),
        PROBE_PORT: String(probePorts[i]),
        // Load shedding as shipped (D16); the tests' services run without it.
        PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '200',
        LOG_LEVEL: 'warn',
        // Tracing as an operator would turn it on: the default sampler (D23).
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      },
      ['--workers', String(WORKERS)],
    )
  const start = async (i: number) => {
    const service = await startOne(i)
    started.push(service)
    return service
  }
  const instances: ServiceProcess[] = []
  cleanups.push(() => Promise.all(instances.map((s) => s.stop())))
  // One at a time: the first applies the migrations.
  for (let i = 0; i < INSTANCES; i++) instances.push(await start(i))
  const balancer = await startHAProxy(
    ports.map((port, i) => ({ name: `petstore${i + 1}`, address: `127.0.0.1:${port}` })),
  )
  cleanups.push(() => balancer.stop())
  return {
    pair,
    pgbouncer,
    redis,
    receiver,
    balancer,
    ports,
    probePorts,
    instances,
    started,
    key,
    start,
  }
}

async function sql(url: string, statement: string): Promise<void> {
  await onDatabase(url, (client) => client.query(statement))
}

/** One create and one read through the balancer, each at the first attempt (no retry). */
function canaryOf(fleet: Fleet) {
  const petstore = new Petstore({
    baseUrl: `${fleet.balancer.url}/v1`,
    apiKey: fleet.key,
    maxRetries: 0,
    timeoutMs: 2_000,
  })
  const run: UsersRun = { calls: [], retries: [], acknowledged: [], unacknowledged: [] }
  let n = 0
  const check = async () => {
    const name = `canary ${n++}`
    try {
      const pet = await petstore.pets.create({ name, categoryId: 1 })
      run.acknowledged.push(pet)
      await petstore.pets.get(pet.id)
      return true
    } catch {
      run.unacknowledged.push(name)
      return false
    }
  }
  return { run, check }
}

async function everyInstanceReady(fleet: Fleet): Promise<boolean> {
  const answers = await Promise.all(
    fleet.ports.map((port) => probe(`http://127.0.0.1:${port}/readyz`, 1_000)),
  )
  return answers.every((a) => a.status === 200)
}

async function waitReady(port: number): Promise<void> {
  const deadline = performance.now() + RECOVERY_DEADLINE_MS
  while ((await probe(`http://127.0.0.1:${port}/readyz`, 1_000)).status !== 200) {
    if (performance.now() > deadline) throw new Error(`instance on ${port} never became ready`)
    await delay(50)
  }
}

/** Waits for full service; resolves with the ms since `since`. */
async function fullServiceAfter(
  fleet: Fleet,
  canary: () => Promise<boolean>,
  since: number,
): Promise<number> {
  for (;;) {
    if ((await everyInstanceReady(fleet)) && (await canary())) return performance.now() - since
    if (performance.now() - since > RECOVERY_DEADLINE_MS) {
      throw new Error(`no full service ${RECOVERY_DEADLINE_MS} ms after the fault`)
    }
    await delay(100)
  }
}

interface Fault {
  name: string
  what: string
  /** Does the fault and what an operator (or orchestrator) does about it; notes for the report. */
  act(fleet: Fleet): Promise<string[]>
}

const faults: Fault[] = [
  {
    name: 'Rolling restart',
    what: 'each instance in turn: SIGTERM, drained exit, started again on its port, /readyz 200, two health-check intervals',
    async act(fleet) {
      const notes: string[] = []
      for (let i = 0; i < INSTANCES; i++) {
        const code = await fleet.instances[i]?.stop('SIGTERM')
        notes.push(`instance ${i + 1} exited ${code}`)
        fleet.instances[i] = await fleet.start(i)
        await waitReady(fleet.ports[i] as number)
        await delay(500)
      }
      return notes
    },
  },
  {
    name: 'SIGKILL',
    what: "instance 2's primary process killed (its workers drain and exit), started again at once",
    async act(fleet) {
      const code = await fleet.instances[1]?.stop('SIGKILL')
      fleet.instances[1] = await fleet.start(1)
      return [`exit ${code === null ? 'by signal' : code}`]
    },
  },
  {
    name: 'Redis stopped',
    what: `redis-server stopped for ${REDIS_DOWN_MS / 1000} s, then started again (empty)`,
    async act(fleet) {
      await fleet.redis.kill('SIGTERM')
      await delay(REDIS_DOWN_MS)
      await fleet.redis.restart()
      const back = performance.now()
      // Counting has resumed once Redis holds keys again.
      while ((await fleet.redis.keyCount()) <= 0) {
        if (performance.now() - back > RECOVERY_DEADLINE_MS) throw new Error('no counts in Redis')
        await delay(50)
      }
      return [
        `counting in Redis again ${Math.round(performance.now() - back)} ms after its restart`,
      ]
    },
  },
  {
    name: 'PgBouncer restarted',
    what: 'PgBouncer killed (SIGKILL: no goodbye to any client) and started again on its port',
    async act(fleet) {
      await fleet.pgbouncer.restart()
      return []
    },
  },
  {
    name: 'PostgreSQL failover',
    what: 'primary stopped immediately (never back); replica promoted and set to commit alone; PgBouncer repointed and reloaded',
    async act(fleet) {
      const { promotedMs } = await fleet.pair.failover()
      fleet.pgbouncer.repoint({ host: '127.0.0.1', port: fleet.pair.replica.port })
      return [`replica promoted and taking writes ${Math.round(promotedMs)} ms after the stop`]
    },
  },
]

/** Where a flood's probes go: a label for the report and the URLs probed in turn. */
interface ProbeTarget {
  label: string
  urls: string[]
  /** Whether its p99 must stay within PROBE_TIMEOUT_MS for the run to hold. */
  mustHold: boolean
}

/**
 * OVERLOAD_CONNECTIONS extra connections (wrk, GET /v1/pets?limit=20) at `target` for
 * OVERLOAD_SECONDS while every URL of every probe target is probed on fresh connections, one
 * probe every PROBE_EVERY_MS whether or not the one before has answered, as an orchestrator's are.
 */
async function flood(fleet: Fleet, name: string, target: string, probed: ProbeTarget[]) {
  const wrk = spawn(
    requireWrk(),
    [
      '-t2',
      `-c${OVERLOAD_CONNECTIONS}`,
      `-d${OVERLOAD_SECONDS}s`,
      '--timeout',
      '10s',
      '-H',
      `Authorization: Bearer ${fleet.key}`,
      `${target}/v1/pets?limit=20`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let output = ''
  wrk.stdout.on('data', (chunk) => {
    output += chunk
  })
  const finished = once(wrk, 'exit')
  let running = true
  void finished.then(() => {
    running = false
  })
  const pending: Promise<void>[] = []
  const probeEvery = async (url: string, times: number[], failed: { count: number }) => {
    // Probing begins once wrk holds its connections and ends with it.
    await delay(500)
    while (running) {
      pending.push(
        probe(url, NO_ANSWER_MS).then((answer) => {
          if (answer.status !== 200 || answer.ms > PROBE_TIMEOUT_MS) failed.count++
          // Refused or reset counts as never answered, not as fast.
          times.push(answer.status === undefined ? NO_ANSWER_MS : answer.ms)
        }),
      )
      await delay(PROBE_EVERY_MS)
    }
  }
  const samples = probed.map((t) => ({ target: t, times: [] as number[], failed: { count: 0 } }))
  await Promise.all([
    finished,
    ...samples.flatMap((s) => s.target.urls.map((url) => probeEvery(url, s.times, s.failed))),
  ])
  await Promise.all(pending)
  return {
    name,
    connections: OVERLOAD_CONNECTIONS,
    seconds: OVERLOAD_SECONDS,
    wrk: output.trim(),
    probes: samples.map(({ target, times, failed }) => ({
      label: target.label,
      mustHold: target.mustHold,
      count: times.length,
      failed: failed.count,
      p50: percentile(times, 50),
      p99: percentile(times, 99),
      max: Math.max(...times),
    })),
  }
}

function windowOf(run: UsersRun, start: number, end: number) {
  const calls = run.calls.filter((c) => c.start >= start && c.start < end)
  const failures = calls.filter((c) => c.failure !== undefined)
  return {
    calls: calls.length,
    failures: failures.length,
    failureKinds: [...new Set(failures.map((c) => c.failure as string))].slice(0, 5),
    lastFailureMs: failures.length ? Math.max(...failures.map((c) => c.end)) - start : undefined,
    retries: run.retries.filter((t) => t >= start && t < end).length,
  }
}

function delta(after: BackendStats, before: BackendStats) {
  return {
    retries: after.retries - before.retries,
    redispatches: after.redispatches - before.redispatches,
    responses5xx: after.responses5xx - before.responses5xx,
    queueMax: after.queueMax,
  }
}

/** Log lines of a process or worker ended by an error (cluster.ts, shutdown.ts), in every process. */
function processErrors(services: readonly ServiceProcess[]): string[] {
  const fatal =
    /shutting down after an uncaught error|worker exited unexpectedly|did not drain in time|shutting down failed/
  return services.flatMap((s) =>
    `${s.stdout()}\n${s.stderr()}`.split('\n').filter((line) => fatal.test(line)),
  )
}

function versions(): Record<string, string> {
  const first = (command: string, args: string[]) => {
    try {
      return execFileSync(command, args, { encoding: 'utf8' }).split('\n')[0]?.trim() ?? ''
    } catch {
      return 'unknown'
    }
  }
  return {
    node: process.version,
    postgres: first(join(PG_BIN, 'postgres'), ['--version']),
    pgbouncer: first('pgbouncer', ['--version']),
    redis: first('redis-server', ['--version']),
    haproxy: first('haproxy', ['-v']),
    wrk: wrkVersion(),
  }
}

async function main(): Promise<number> {
  const began = new Date()
  console.log('building the fleet…')
  const fleet = await buildFleet()
  const canary = canaryOf(fleet)
  const users = startUsers({
    baseUrl: fleet.balancer.url,
    apiKey: fleet.key,
    users: USERS,
    prefix: 'fleet ',
  })
  const phases: PhaseReport[] = []
  const floods: FloodReport[] = []
  let trace: TraceReport | undefined
  try {
    const runPhase = async (
      name: string,
      what: string,
      act: () => Promise<string[]>,
    ): Promise<PhaseReport> => {
      console.log(`${name}…`)
      await fleet.balancer.clearMaxima()
      const before = await fleet.balancer.stats()
      const start = performance.now()
      const notes = await act()
      const actedMs = performance.now() - start
      const recoveredMs = await fullServiceAfter(fleet, canary.check, start)
      await delay(SETTLE_MS)
      const end = performance.now()
      const report: PhaseReport = {
        name,
        what,
        notes,
        actedMs,
        recoveredMs,
        windowMs: end - start,
        ...windowOf(users.run, start, end),
        haproxy: delta(await fleet.balancer.stats(), before),
      }
      console.log(JSON.stringify(report))
      phases.push(report)
      return report
    }
    await runPhase('Steady load', `${BASELINE_MS / 1000} s, no fault`, async () => {
      await delay(BASELINE_MS)
      return []
    })
    console.log('one create, traced…')
    trace = await traceOneCreate(fleet.balancer.url, fleet.key, fleet.receiver)
    for (const fault of faults) await runPhase(fault.name, fault.what, () => fault.act(fleet))
    await runPhase(
      'Overload',
      `${OVERLOAD_CONNECTIONS.toLocaleString('en-US')} extra connections through the balancer for ${OVERLOAD_SECONDS} s (wrk, GET /v1/pets?limit=20)`,
      async () => {
        const healthz = fleet.ports.map((port) => `http://127.0.0.1:${port}/healthz`)
        floods.push(
          await flood(fleet, 'Overload, through the balancer', fleet.balancer.url, [
            { label: "every instance's `/healthz` on its API port", urls: healthz, mustHold: true },
          ]),
        )
        return []
      },
    )
    await runPhase(
      'Flood on one instance',
      `${OVERLOAD_CONNECTIONS.toLocaleString('en-US')} connections straight at instance 1's API port for ${OVERLOAD_SECONDS} s, as a Kubernetes Service would send them (no balancer's cap)`,
      async () => {
        const [api, probes] = [fleet.ports[0], fleet.probePorts[0]]
        floods.push(
          await flood(fleet, 'Flood on one instance', `http://127.0.0.1:${api}`, [
            {
              label: 'its `/healthz` on the API port',
              urls: [`http://127.0.0.1:${api}/healthz`],
              mustHold: false,
            },
            {
              label: 'its `/healthz` on `PROBE_PORT`',
              urls: [`http://127.0.0.1:${probes}/healthz`],
              mustHold: true,
            },
          ]),
        )
        return []
      },
    )
  } finally {
    await users.stop()
  }

  const databaseUrl = fleet.pair.replica.url('petstore')
  const report: FleetReport = {
    began: began.toISOString(),
    seconds: (Date.now() - began.getTime()) / 1000,
    quick: QUICK,
    machine: { cpus: cpus().length, memoryGb: Math.round(totalmem() / 2 ** 30) },
    versions: versions(),
    setup: { instances: INSTANCES, workers: WORKERS, users: USERS },
    phases,
    floods,
    totals: {
      calls: users.run.calls.length,
      failures: users.run.calls.filter((c) => c.failure !== undefined).length,
      retries: users.run.retries.length,
      acknowledged: users.run.acknowledged.length,
      unacknowledged: users.run.unacknowledged.length,
    },
    users: await checkStored(databaseUrl, 'fleet ', users.run),
    canary: {
      acknowledged: canary.run.acknowledged.length,
      ...(await checkStored(databaseUrl, 'canary ', canary.run)),
    },
    probeTimeoutMs: PROBE_TIMEOUT_MS,
    trace,
    processErrors: processErrors(fleet.started),
  }
  await cleanUp()

  const { markdown, held } = renderFleet(report)
  console.log(markdown)
  if (!QUICK) writeFileSync(new URL('../../docs/fleet-report.md', import.meta.url), markdown)
  return held ? 0 : 1
}

process.once('SIGINT', () => void cleanUp().then(() => process.exit(130)))
try {
  process.exitCode = await main()
} finally {
  await cleanUp()
}
