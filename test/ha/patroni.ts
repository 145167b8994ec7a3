// D30: the service on the Patroni reference topology of deploy/patroni (scripts/fleet/
// patroni-cluster.ts runs its files on this machine: three etcd members, three PostgreSQL members
// under Patroni in synchronous_mode_strict, HAProxy on /primary, PgBouncer in transaction mode in
// front of it). Users of our SDK create (with Idempotency-Keys), read and page through one instance
// while Patroni is put through a planned switchover, the leader's postmaster killed, the leader's
// machine lost (its Patroni and PostgreSQL killed together, later started again to rejoin as a
// replica), one etcd member stopped, etcd's quorum lost until the leader demotes itself, and
// PgBouncer killed and started again during a switchover. After each: no acknowledged create
// missing or stored twice, no call failed to its caller, no answer 500, the instance still
// running; and the write gap of each fault is printed.
//
// `npm run test:patroni` (in .ci/run: about two and a half minutes, beyond npm test's budget).
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { type PatroniCluster, startPatroniCluster } from '../../scripts/fleet/patroni-cluster.ts'
import { generateApiKey } from '../../src/contract/api-key.ts'
import { type CallRecord, checkStored, startUsers, type Users } from '../helpers/fleet-users.ts'
import { runCli, type ServiceProcess, startService } from '../helpers/process.ts'

const ROOT = join(import.meta.dirname, '../..')

function installed(program: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${program}`], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

const missing = ['patroni', 'patronictl', 'etcd', 'haproxy', 'pgbouncer', 'psql'].filter(
  (program) => !installed(program) && !installed(`/usr/sbin/${program}`),
)
const skip =
  missing.length === 0
    ? undefined
    : `not installed: ${missing.join(', ')} (Debian packages patroni, etcd-server, haproxy, pgbouncer, postgresql-client)`
if (skip !== undefined && process.env.PETSTORE_REQUIRE_PATRONI === '1') {
  throw new Error(`${skip}; PETSTORE_REQUIRE_PATRONI=1 makes that a failure`)
}

/**
 * The SDK's retries a call: each waits at least the service's Retry-After (1 s), so 30 cover a
 * lost leader's gap (Patroni's ttl of 20 s and a loop) with room (docs/fleet.md).
 */
const MAX_RETRIES = 30
const USERS = 8
const THINK_MS = 20

/**
 * The write gap of a fault at `at`: the longest stretch without an acknowledged create, among the
 * creates acknowledged from `at` until `until` and the last one before `at`.
 */
function writeGapMs(calls: readonly CallRecord[], at: number, until: number): number {
  const acknowledged = calls
    .filter((c) => c.operation === 'create' && c.failure === undefined && c.end > 0)
    .map((c) => c.end)
    .sort((a, b) => a - b)
  const last = acknowledged.filter((end) => end <= at).at(-1) ?? at
  const since = [last, ...acknowledged.filter((end) => end > at && end <= until)]
  return Math.max(0, ...since.slice(1).map((end, i) => end - (since[i] as number)))
}

/** Answers of `status` in the instance's request log (LOG_LEVEL=info, one line a request). */
function answersOf(service: ServiceProcess, status: number): number {
  return service
    .stdout()
    .split('\n')
    .filter((line) => line.includes(`"status":${status}`)).length
}

describe('the service on Patroni (deploy/patroni)', { skip }, () => {
  let cluster: PatroniCluster
  let service: ServiceProcess
  let users: Users
  const key = generateApiKey('production')

  before(async () => {
    cluster = await startPatroniCluster()
    // docs/operations.md's order: migrate as the owner, then the runtime role's grants.
    const migrated = await runCli(['migrate'], { DATABASE_URL: cluster.ownerUrl })
    assert.equal(migrated.code, 0, migrated.stderr)
    execFileSync('psql', [
      cluster.ownerUrl,
      ...['-v', 'ON_ERROR_STOP=1', '-v', 'runtime=petstore'],
      ...['-f', join(ROOT, 'deploy/postgresql/grants.sql')],
    ])
    service = await startService({
      DATABASE_URL: cluster.serviceUrl,
      DATABASE_POOLER: 'transaction',
      // The runtime role cannot migrate (grants.sql); `petstore migrate` did, as the owner.
      PETSTORE_MIGRATE: 'off',
      PETSTORE_API_KEYS: key,
      PETSTORE_RATE_LIMIT: '0',
    })
    users = startUsers({
      baseUrl: service.url,
      apiKey: key,
      users: USERS,
      prefix: 'patroni ',
      thinkMs: THINK_MS,
      maxRetries: MAX_RETRIES,
    })
    await delay(2_000)
  })

  after(async () => {
    await users?.stop()
    await service?.stop()
    await cluster?.stop()
  })

  test('the cluster is as patroni.yml says: a leader, a synchronous standby, strict mode', async () => {
    const config = (await (
      await fetch(`http://127.0.0.1:${cluster.members[0]?.apiPort}/config`)
    ).json()) as Record<string, unknown>
    assert.equal(config.synchronous_mode, true)
    assert.equal(config.synchronous_mode_strict, true)
    const {
      ttl = 0,
      loop_wait: loopWait = 0,
      retry_timeout: retry = 0,
    } = config as Record<string, number | undefined>
    assert.ok(ttl > 0, 'ttl set')
    assert.ok(loopWait + 2 * retry <= ttl, `loop_wait + 2 × retry_timeout ≤ ttl (${ttl})`)
    const roles = (await cluster.cluster()).map((m) => m.role).sort()
    assert.deepEqual(roles, ['leader', 'replica', 'sync_standby'])
  })

  /**
   * Runs `fault` under the users' load; waits until Patroni has acted on it (`acted`), a leader
   * leads with a synchronous standby and the users' creates are acknowledged again; checks the
   * promise over the calls made since.
   */
  async function throughFault(
    name: string,
    fault: () => Promise<unknown>,
    acted: () => Promise<boolean> = async () => true,
    notLeader = '',
  ) {
    const at = performance.now()
    await fault()
    for (const deadline = Date.now() + 120_000; !(await acted()); await delay(200)) {
      assert.ok(Date.now() < deadline, `Patroni did not act on ${name}`)
    }
    const leader = await cluster.settled({ timeoutMs: 120_000, notLeader })
    const settledAt = performance.now()
    const acknowledgedSince = () =>
      users.run.calls.some((c) => c.operation === 'create' && !c.failure && c.start > settledAt)
    for (const deadline = Date.now() + 60_000; !acknowledgedSince(); await delay(200)) {
      assert.ok(Date.now() < deadline, `no create acknowledged after ${name}`)
    }
    // Calls under way during the fault settle within their retries.
    await delay(2_000)
    const calls = [...users.run.calls]
    const failed = calls.filter((c) => c.failure !== undefined && c.start >= at - 1_000)
    const gap = writeGapMs(calls, at, performance.now())
    console.log(`${name}: leader ${leader}, write gap ${Math.round(gap)} ms`)
    assert.deepEqual(
      failed.map((c) => c.failure),
      [],
      'no call failed to its caller',
    )
    assert.equal(answersOf(service, 500), 0, 'no answer 500')
    assert.equal(service.child.exitCode, null, 'the instance still runs')
    return leader
  }

  test('a planned switchover: patronictl, the sync standby takes over', async () => {
    const before = (await cluster.cluster()).find((m) => m.role === 'leader')?.name
    const leader = await throughFault(
      'switchover',
      () => cluster.switchover(),
      async () => (await cluster.cluster()).find((m) => m.role === 'leader')?.name !== before,
    )
    assert.notEqual(leader, before)
  })

  test("the leader's postmaster killed: Patroni restarts it or fails over", async () => {
    const leader = (await cluster.cluster()).find((m) => m.role === 'leader')?.name ?? ''
    let killed: number | undefined
    // Patroni acted: a new postmaster on that member, or another member leads.
    const acted = async () => {
      const now = (await cluster.cluster()).find((m) => m.role === 'leader')?.name
      const pid = cluster.postmasterPid(leader)
      return now !== leader || (pid !== undefined && pid !== killed)
    }
    await throughFault(
      'postmaster SIGKILL',
      async () => {
        killed = await cluster.killPostmaster(leader)
      },
      acted,
    )
  })

  test("the leader's machine lost, then back: a new leader after ttl, the old one rejoins", async () => {
    const lost = (await cluster.cluster()).find((m) => m.role === 'leader')?.name ?? ''
    const leader = await throughFault(
      'machine lost',
      () => cluster.loseMachine(lost),
      undefined,
      lost,
    )
    assert.notEqual(leader, lost)
    cluster.startMember(lost)
    const deadline = Date.now() + 60_000
    for (;;) {
      const back = (await cluster.cluster()).find((m) => m.name === lost)
      if (back?.state === 'running' || back?.state === 'streaming') break
      assert.ok(
        Date.now() < deadline,
        `${lost} did not rejoin: ${cluster.log(`patroni:${lost}`).slice(-2_000)}`,
      )
      await delay(500)
    }
    const rejoined = (await cluster.cluster()).find((m) => m.name === lost)
    assert.notEqual(rejoined?.role, 'leader')
  })

  const leaderName = async () => (await cluster.cluster()).find((m) => m.role === 'leader')?.name

  test('one etcd member stopped: nothing happens', async () => {
    const before = await leaderName()
    const at = performance.now()
    await cluster.stopEtcd(0)
    // Past a loop and retry_timeout: long enough for a lost quorum to show, were it lost.
    await delay(9_000)
    const since = users.run.calls.filter((c) => c.start >= at)
    assert.equal(await leaderName(), before, 'the same leader')
    assert.deepEqual(
      since.filter((c) => c.failure !== undefined).map((c) => c.failure),
      [],
    )
    const gap = writeGapMs(users.run.calls, at, performance.now())
    console.log(`one etcd member stopped: leader ${before}, write gap ${Math.round(gap)} ms`)
    cluster.startEtcd(0)
    await cluster.etcdHealthy(0)
  })

  test("etcd's quorum lost: the leader demotes itself, writes stop, then all comes back", async () => {
    const primaries = () =>
      Promise.all(
        cluster.members.map((m) =>
          fetch(`http://127.0.0.1:${m.apiPort}/primary`).then(
            (r) => r.status === 200,
            () => false,
          ),
        ),
      ).then((answers) => answers.filter(Boolean).length)
    let demotedAfterMs = Number.NaN
    await throughFault("etcd's quorum lost", async () => {
      const stopped = performance.now()
      await Promise.all([cluster.stopEtcd(0), cluster.stopEtcd(1)])
      // The leader cannot renew its lock: at its next loop (≤ loop_wait) it retries etcd for up to
      // retry_timeout, then demotes itself, well before the lock's ttl could let another take it.
      for (const deadline = Date.now() + 30_000; (await primaries()) > 0; await delay(200)) {
        assert.ok(Date.now() < deadline, 'a member still says it is the primary 30 s after')
      }
      demotedAfterMs = performance.now() - stopped
      // Long enough for HAProxy to take the demoted member out (fall 2 × inter 1 s): writes stop.
      await delay(4_000)
      cluster.startEtcd(0)
      cluster.startEtcd(1)
      await Promise.all([cluster.etcdHealthy(0), cluster.etcdHealthy(1)])
    })
    console.log(`etcd quorum lost: no member said primary ${Math.round(demotedAfterMs)} ms after`)
  })

  test('PgBouncer killed and started again during a switchover', async () => {
    const before = await leaderName()
    const leader = await throughFault(
      'switchover with PgBouncer restarted',
      () => Promise.all([cluster.switchover(), delay(500).then(() => cluster.restartPgBouncer())]),
      async () => (await leaderName()) !== before,
    )
    assert.notEqual(leader, before)
  })

  test('every acknowledged create is stored once', async () => {
    const run = await users.stop()
    const stored = await checkStored(cluster.ownerUrl, 'patroni ', run)
    console.log(
      `${run.acknowledged.length} acknowledged, ${stored.stored} stored, ${run.unacknowledged.length} unacknowledged (${stored.unacknowledgedStored} of them stored), ${run.retries.length} retries`,
    )
    assert.ok(run.acknowledged.length > 0)
    // The log the 500s are counted in is the one the creates were answered in.
    assert.ok(answersOf(service, 201) >= run.acknowledged.length, 'every 201 in the request log')
    assert.deepEqual(stored.lost, [])
    assert.deepEqual(stored.twice, [])
    assert.equal(run.calls.filter((c) => c.failure !== undefined).length, 0)
  })
})
