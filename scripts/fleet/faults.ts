// The faults `npm run fleet` puts the fleet through, one after another: first those of the
// instances and what they depend on (a deploy, a crash, Redis, PgBouncer), then the database's,
// each done the way it happens for real, by patronictl or a signal (D30). Nothing here promotes a
// server or repoints PgBouncer: Patroni and HAProxy do, and each fault waits for them to have
// done so before the run looks for full service.
import { setTimeout as delay } from 'node:timers/promises'
import type { Fleet } from './fleet.ts'
import { until } from './patroni-cluster.ts'
import { probe } from './probe.ts'

/** How long the faults that last a while last: the quick run shortens them. */
export interface FaultTimes {
  redisDownMs: number
  /** How long one etcd member stays stopped: past a loop and retry_timeout, when a lost
   * quorum would show. */
  etcdMemberDownMs: number
  /** How long the quorum stays lost after the leader demoted itself. */
  quorumLostAfterDemotionMs: number
}

export interface Fault {
  name: string
  what: string
  /** Whether Patroni acts on it: its timeline is read from the members' logs. */
  database: boolean
  /**
   * Does the fault and waits until whatever answers it (a deploy's steps, Patroni) has done so;
   * resolves with notes for the report.
   */
  act(fleet: Fleet, times: FaultTimes): Promise<string[]>
}

/** A fault not answered within this long fails the run. */
const DEADLINE_MS = 120_000

/** Resolves once `check` says yes; fails the run if it has not within DEADLINE_MS. */
const whenTrue = (what: string, check: () => Promise<boolean>) =>
  until(what, async () => ((await check()) ? true : undefined), DEADLINE_MS)

async function waitReady(port: number): Promise<void> {
  await whenTrue(
    `the instance on ${port} ready`,
    async () => (await probe(`http://127.0.0.1:${port}/readyz`, 1_000)).status === 200,
  )
}

async function leaderOf(fleet: Fleet): Promise<string> {
  const leader = (await fleet.cluster.cluster()).find((m) => m.role === 'leader')?.name
  if (leader === undefined) throw new Error('no leader')
  return leader
}

/** Members answering 200 on Patroni's /primary: the ones HAProxy would send writes to. */
async function primaries(fleet: Fleet): Promise<number> {
  const answers = await Promise.all(
    fleet.cluster.members.map((m) =>
      fetch(`http://127.0.0.1:${m.apiPort}/primary`).then(
        (r) => r.status === 200,
        () => false,
      ),
    ),
  )
  return answers.filter(Boolean).length
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`

/** A switchover to the sync standby; resolves once another member leads with a sync standby. */
async function switchover(fleet: Fleet, during?: () => Promise<unknown>): Promise<string[]> {
  const before = await leaderOf(fleet)
  const started = performance.now()
  await Promise.all([fleet.cluster.switchover(), during?.()])
  const after = await fleet.cluster.settled({ timeoutMs: DEADLINE_MS, notLeader: before })
  return [
    `${before} → ${after}, patronictl and the new leader's sync standby within ${seconds(performance.now() - started)}`,
  ]
}

export const INSTANCE_FAULTS: Fault[] = [
  {
    name: 'Rolling restart',
    what: 'each instance in turn: SIGTERM, drained exit, started again on its port, /readyz 200, two health-check intervals',
    database: false,
    async act(fleet) {
      const notes: string[] = []
      for (let i = 0; i < fleet.setup.instances; i++) {
        const code = await fleet.stop(i, 'SIGTERM')
        notes.push(`instance ${i + 1} exited ${code}`)
        fleet.instances[i] = await fleet.start(i)
        await waitReady(fleet.ports[i] as number)
        await delay(500)
      }
      return notes
    },
  },
  {
    name: 'Instance SIGKILL',
    what: "instance 2's primary process killed (its workers drain and exit), started again at once",
    database: false,
    async act(fleet) {
      const code = await fleet.stop(1, 'SIGKILL')
      fleet.instances[1] = await fleet.start(1)
      return [`exit ${code === null ? 'by signal' : code}`]
    },
  },
  {
    name: 'Redis stopped',
    what: 'redis-server stopped, then started again (empty)',
    database: false,
    async act(fleet, times) {
      await fleet.redis.kill('SIGTERM')
      await delay(times.redisDownMs)
      await fleet.redis.restart()
      const back = performance.now()
      // Counting has resumed once Redis holds keys again.
      await whenTrue('counts in Redis', async () => (await fleet.redis.keyCount()) > 0)
      return [
        `down ${seconds(times.redisDownMs)}; counting in Redis again ${Math.round(performance.now() - back)} ms after its restart`,
      ]
    },
  },
  {
    name: 'PgBouncer restarted',
    what: 'PgBouncer killed (SIGKILL: no goodbye to any client) and started again on its port with the same files',
    database: false,
    async act(fleet) {
      await fleet.cluster.restartPgBouncer()
      return []
    },
  },
]

/** The database's faults, in order: the lost machine's member is the one that comes back. */
export function databaseFaults(): Fault[] {
  let lost: string | undefined
  return [
    {
      name: 'Switchover',
      what: "`patronictl switchover --force` from the leader to its sync standby, as for a machine's maintenance",
      database: true,
      act: (fleet) => switchover(fleet),
    },
    {
      name: 'Postmaster SIGKILL',
      what: "SIGKILL of the leader's postmaster; its Patroni, still holding the lock, acts on it",
      database: true,
      async act(fleet) {
        const leader = await leaderOf(fleet)
        const killed = await fleet.cluster.killPostmaster(leader)
        // Patroni acted: a new postmaster on that member, or another member leads.
        await whenTrue('Patroni to act on the killed postmaster', async () => {
          const pid = fleet.cluster.postmasterPid(leader)
          return (await leaderOf(fleet)) !== leader || (pid !== undefined && pid !== killed)
        })
        const now = await fleet.cluster.settled({ timeoutMs: DEADLINE_MS })
        return [
          now === leader
            ? `Patroni started PostgreSQL again on ${leader}, which kept the lock`
            : `${now} took over from ${leader}`,
        ]
      },
    },
    {
      name: 'Machine lost',
      what: "SIGKILL of the leader's Patroni and PostgreSQL together, as when its machine is lost; it stays down for this phase",
      database: true,
      async act(fleet) {
        const member = await leaderOf(fleet)
        lost = member
        await fleet.cluster.loseMachine(member)
        const leader = await fleet.cluster.settled({ timeoutMs: DEADLINE_MS, notLeader: member })
        return [`${member} lost; ${leader} took the lock once it expired`]
      },
    },
    {
      name: 'Lost member back',
      what: "the lost machine's Patroni started again: its member rejoins as a replica (pg_rewind), under load",
      database: true,
      async act(fleet) {
        const member = lost
        if (member === undefined) throw new Error('no machine was lost')
        fleet.cluster.startMember(member)
        const back = await until(
          `${member} to rejoin`,
          async () => {
            const it = (await fleet.cluster.cluster()).find((m) => m.name === member)
            const following =
              it?.role !== 'leader' && ['running', 'streaming'].includes(it?.state ?? '')
            return following ? it : undefined
          },
          DEADLINE_MS,
        )
        await fleet.cluster.settled({ timeoutMs: DEADLINE_MS })
        return [`${member} back as ${back.role}`]
      },
    },
    {
      name: 'One etcd member stopped',
      what: 'one of the three etcd members stopped (SIGKILL), then started again',
      database: true,
      async act(fleet, times) {
        const before = await leaderOf(fleet)
        await fleet.cluster.stopEtcd(0)
        await delay(times.etcdMemberDownMs)
        const after = await leaderOf(fleet)
        fleet.cluster.startEtcd(0)
        await fleet.cluster.etcdHealthy(0)
        return [
          `down ${seconds(times.etcdMemberDownMs)}; ${after === before ? `${before} led throughout` : `the leader changed, ${before} → ${after}`}`,
        ]
      },
    },
    {
      name: 'etcd quorum lost',
      what: 'two of the three etcd members stopped until the leader has demoted itself and a while more, then started again',
      database: true,
      async act(fleet, times) {
        const stopped = performance.now()
        await Promise.all([fleet.cluster.stopEtcd(0), fleet.cluster.stopEtcd(1)])
        // The leader cannot renew its lock: at its next loop (≤ loop_wait) it retries etcd for up
        // to retry_timeout, then demotes itself, before the lock's ttl could let another take it.
        await whenTrue('the leader to demote itself', async () => (await primaries(fleet)) === 0)
        const demotedMs = performance.now() - stopped
        await delay(times.quorumLostAfterDemotionMs)
        fleet.cluster.startEtcd(0)
        fleet.cluster.startEtcd(1)
        await Promise.all([fleet.cluster.etcdHealthy(0), fleet.cluster.etcdHealthy(1)])
        const backMs = performance.now() - stopped
        const leader = await fleet.cluster.settled({ timeoutMs: DEADLINE_MS })
        return [
          `no member answered /primary with 200 ${seconds(demotedMs)} after the stop; etcd healthy again after ${seconds(backMs)}; ${leader} leads`,
        ]
      },
    },
    {
      name: 'PgBouncer restarted in a switchover',
      what: 'a switchover, and PgBouncer killed and started again 0.5 s into it',
      database: true,
      act: (fleet) =>
        switchover(fleet, () => delay(500).then(() => fleet.cluster.restartPgBouncer())),
    },
  ]
}
