// The fleet run: the fleet of fleet.ts under the load of our own SDK's users, put through the
// faults of faults.ts one after another, then an overload and a flood on one instance; at the
// end what the database holds is read and each fault's window counted (counts.ts), with Patroni's
// own timeline of each database fault (patroni-log.ts). `npm run fleet` (run.ts) writes the
// report; `npm run test:patroni` runs the quick form and asserts what must hold.
//
// Load: 32 SDK users (test/helpers/fleet-users.ts) creating with Idempotency-Keys, getting and
// paging throughout, each call allowed 30 retries: each waits at least the service's Retry-After
// (1 s), so they cover a lost leader's gap (Patroni's ttl of 20 s and a loop) with room
// (docs/fleet.md). And a canary without keys: a create and a read, one attempt each, five times a
// second throughout, whose failed creates are the outcomes a caller cannot know (stored or not?),
// and which after a fault tells when full service is back.
import { execFileSync } from 'node:child_process'
import { cpus, totalmem } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import type { Pet } from '../../client/src/index.ts'
import {
  type CallRecord,
  checkStored,
  emptyRun,
  startUsers,
} from '../../test/helpers/fleet-users.ts'
import type { ServiceProcess } from '../../test/helpers/process.ts'
import { wrkVersion } from '../bench/harness.ts'
import { countWindow, type Evidence, type Window } from './counts.ts'
import { databaseFaults, type FaultTimes, INSTANCE_FAULTS } from './faults.ts'
import { buildFleet, type Fleet, Parts } from './fleet.ts'
import { flood, PROBE_TIMEOUT_MS } from './flood.ts'
import { PG_BIN } from './patroni-cluster.ts'
import { patroniTimeline } from './patroni-log.ts'
import { probe } from './probe.ts'
import type { FleetReport, FloodReport, PhaseReport } from './report.ts'
import { type TraceReport, traceOneCreate } from './trace.ts'

const USERS = 32
/** Enough to ride out a lost leader (see above); the SDK's default is 2. */
const USER_RETRIES = 30
/** After full service, calls that began during the fault have this long to settle into its window. */
const SETTLE_MS = 2_000
/** The canary's pause between its rounds. */
const CANARY_EVERY_MS = 200
/** A fault that does not end in full service within this long fails the run. */
const RECOVERY_DEADLINE_MS = 120_000

export interface FleetOptions {
  /** Shorter faults and floods: the form CI runs (test/ha/patroni.ts). */
  quick: boolean
  /** Progress lines as the run goes. */
  log?: (line: string) => void
}

/** The canary: creates without an Idempotency-Key, one attempt each, and reads them back. */
function canaryOf(fleet: Fleet) {
  const run = emptyRun()
  const headers = { authorization: `Bearer ${fleet.key}`, 'content-type': 'application/json' }
  const url = `${fleet.balancer.url}/v1/pets`
  let n = 0
  const check = async () => {
    const name = `canary ${n++}`
    const record: CallRecord = { start: performance.now(), end: 0, operation: 'create', name }
    run.calls.push(record)
    let pet: Pet
    try {
      const created = await fetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name, categoryId: 1 }),
        signal: AbortSignal.timeout(2_000),
      })
      if (created.status !== 201) throw new Error(`create answered ${created.status}`)
      pet = (await created.json()) as Pet
    } catch (err) {
      record.failure = String(err)
      run.unacknowledged.push(name)
      return false
    } finally {
      record.end = performance.now()
    }
    run.acknowledged.push(pet)
    const read = await fetch(`${url}/${pet.id}`, {
      headers,
      signal: AbortSignal.timeout(2_000),
    }).catch(() => undefined)
    return read?.status === 200
  }
  let running = true
  const loop = (async () => {
    while (running) {
      await check()
      await delay(CANARY_EVERY_MS)
    }
  })()
  const stop = async () => {
    running = false
    await loop
  }
  return { run, check, stop }
}

async function everyInstanceReady(fleet: Fleet): Promise<boolean> {
  const answers = await Promise.all(
    fleet.ports.map((port) => probe(`http://127.0.0.1:${port}/readyz`, 1_000)),
  )
  return answers.every((a) => a.status === 200)
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

/** A phase as it ran; its counts come at the end, once the database has been read. */
interface Phase extends Window {
  name: string
  what: string
  notes: string[]
  database: boolean
  actedMs: number
  recoveredMs: number
  haproxy: PhaseReport['haproxy']
}

/** Error lines of processes or workers ended by one (cluster.ts, shutdown.ts), timed. */
function processErrors(services: readonly ServiceProcess[]): Evidence['exits'] {
  const fatal =
    /shutting down after an uncaught error|worker exited unexpectedly|did not drain in time|shutting down failed/
  return services.flatMap((s) =>
    `${s.stdout()}\n${s.stderr()}`
      .split('\n')
      .filter((line) => fatal.test(line))
      .map((line) => {
        const time = Number((/"time":(\d+)/.exec(line) ?? [])[1] ?? Number.NaN)
        return { at: time - performance.timeOrigin, what: line.slice(0, 200) }
      }),
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
    patroni: first('patroni', ['--version']),
    etcd: first('etcd', ['--version']),
    pgbouncer: first('pgbouncer', ['--version']),
    redis: first('redis-server', ['--version']),
    haproxy: first('haproxy', ['-v']),
    wrk: wrkVersion(),
  }
}

/** The settings D30 chose, as the running cluster reports them (GET /config), and its roles. */
async function patroniAsRunning(fleet: Fleet): Promise<FleetReport['patroni']> {
  const member = fleet.cluster.members[0]
  const config = (await (
    await fetch(`http://127.0.0.1:${member?.apiPort}/config`)
  ).json()) as Record<string, unknown>
  const settings = Object.fromEntries(
    PATRONI_SETTINGS.map((name) => [name, config[name] as number | boolean | undefined]),
  )
  const roles = (await fleet.cluster.cluster()).map((m) => m.role).sort()
  return { settings, roles }
}

const PATRONI_SETTINGS = [
  'ttl',
  'loop_wait',
  'retry_timeout',
  'maximum_lag_on_failover',
  'synchronous_mode',
  'synchronous_mode_strict',
]

const wall = (at: number) => performance.timeOrigin + at

export async function runFleet({ quick, log = () => {} }: FleetOptions): Promise<FleetReport> {
  const setup = { instances: 3, workers: 2 }
  const baselineMs = quick ? 2_000 : 5_000
  const times: FaultTimes = {
    redisDownMs: quick ? 3_000 : 10_000,
    etcdMemberDownMs: quick ? 6_000 : 9_000,
    quorumLostAfterDemotionMs: quick ? 2_000 : 4_000,
  }
  const overload = { connections: quick ? 500 : 2_000, seconds: quick ? 4 : 10 }
  const began = new Date()
  const parts = new Parts()
  // Ctrl-C stops every part started so far: no etcd, Patroni or PostgreSQL is left behind.
  const interrupted = () => void parts.stopAll().then(() => process.exit(130))
  process.once('SIGINT', interrupted)
  try {
    log('building the fleet…')
    const fleet = await buildFleet(setup, parts)
    const patroni = await patroniAsRunning(fleet)
    const canary = canaryOf(fleet)
    const users = startUsers({
      baseUrl: fleet.balancer.url,
      apiKey: fleet.key,
      users: USERS,
      prefix: 'fleet ',
      maxRetries: USER_RETRIES,
    })
    const phases: Phase[] = []
    const floods: FloodReport[] = []
    let trace: TraceReport | undefined
    try {
      const runPhase = async (
        name: string,
        what: string,
        database: boolean,
        act: () => Promise<string[]>,
      ) => {
        log(`${name}…`)
        await fleet.balancer.clearMaxima()
        const before = await fleet.balancer.stats()
        const start = performance.now()
        const notes = await act()
        const actedMs = performance.now() - start
        const recoveredMs = await fullServiceAfter(fleet, canary.check, start)
        await delay(SETTLE_MS)
        const after = await fleet.balancer.stats()
        phases.push({
          name,
          what,
          notes,
          database,
          start,
          end: performance.now(),
          actedMs,
          recoveredMs,
          haproxy: {
            retries: after.retries - before.retries,
            redispatches: after.redispatches - before.redispatches,
            responses5xx: after.responses5xx - before.responses5xx,
            queueMax: after.queueMax,
          },
        })
      }
      await runPhase('Steady load', `${baselineMs / 1000} s, no fault`, false, async () => {
        await delay(baselineMs)
        return []
      })
      log('one create, traced…')
      trace = await traceOneCreate(fleet.balancer.url, fleet.key, fleet.receiver)
      for (const fault of [...INSTANCE_FAULTS, ...databaseFaults()]) {
        await runPhase(fault.name, fault.what, fault.database, () => fault.act(fleet, times))
      }
      const load = { ...overload, key: fleet.key }
      const many = overload.connections.toLocaleString('en-US')
      await runPhase(
        'Overload',
        `${many} extra connections through the balancer for ${overload.seconds} s (wrk, GET /v1/pets?limit=20)`,
        false,
        async () => {
          const healthz = fleet.ports.map((port) => `http://127.0.0.1:${port}/healthz`)
          floods.push(
            await flood(load, 'Overload, through the balancer', fleet.balancer.url, [
              {
                label: "every instance's `/healthz` on its API port",
                urls: healthz,
                mustHold: true,
              },
            ]),
          )
          return []
        },
      )
      await runPhase(
        'Flood on one instance',
        `${many} connections straight at instance 1's API port for ${overload.seconds} s, as a Kubernetes Service would send them (no balancer's cap)`,
        false,
        async () => {
          const [api, probes] = [fleet.ports[0], fleet.probePorts[0]]
          floods.push(
            await flood(load, 'Flood on one instance', `http://127.0.0.1:${api}`, [
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
      await Promise.all([users.stop(), canary.stop()])
    }

    // The final read, from the leader, as the users' creates were acknowledged by it.
    const evidence: Evidence = {
      users: users.run,
      canary: canary.run,
      usersStored: await checkStored(fleet.cluster.ownerUrl, 'fleet ', users.run),
      canaryStored: await checkStored(fleet.cluster.ownerUrl, 'canary ', canary.run),
      exits: [
        ...fleet.exits.map((e) => ({
          at: e.at,
          what: `instance ${e.instance + 1} exited ${e.code ?? 'by a signal'}`,
        })),
        ...processErrors(fleet.started),
      ],
    }
    const patroniLogs = new Map(
      fleet.cluster.members.map((m) => [m.name, fleet.cluster.log(`patroni:${m.name}`)]),
    )
    const reports: PhaseReport[] = phases.map((phase) => ({
      name: phase.name,
      what: phase.what,
      notes: phase.notes,
      actedMs: phase.actedMs,
      recoveredMs: phase.recoveredMs,
      windowMs: phase.end - phase.start,
      haproxy: phase.haproxy,
      ...countWindow(phase, evidence),
      timeline: phase.database
        ? patroniTimeline(patroniLogs, wall(phase.start), wall(phase.end))
        : undefined,
    }))
    return {
      began: began.toISOString(),
      seconds: (Date.now() - began.getTime()) / 1000,
      quick,
      machine: { cpus: cpus().length, memoryGb: Math.round(totalmem() / 2 ** 30) },
      versions: versions(),
      setup: { ...setup, users: USERS, userRetries: USER_RETRIES },
      patroni,
      phases: reports,
      floods,
      totals: countWindow({ start: 0, end: Number.POSITIVE_INFINITY }, evidence),
      canary: { creates: canary.run.calls.length, acknowledged: canary.run.acknowledged.length },
      probeTimeoutMs: PROBE_TIMEOUT_MS,
      trace,
    }
  } finally {
    process.removeListener('SIGINT', interrupted)
    await parts.stopAll()
  }
}
