// D30: the fleet on the Patroni reference topology of deploy/patroni, in the quick form of
// `npm run fleet` (scripts/fleet/harness.ts): three etcd members, three PostgreSQL members under
// Patroni in synchronous_mode_strict, HAProxy on /primary, PgBouncer in transaction mode in front
// of it; three instances behind HAProxy; 32 SDK users and a canary without keys. Through a rolling
// restart, an instance killed, Redis and PgBouncer restarted, a switchover, the leader's
// postmaster killed, the leader's machine lost and back, one etcd member stopped, etcd's quorum
// lost, PgBouncer restarted during a switchover, an overload and a flood, each fault answered by
// the engines alone. What a fleet must hold (scripts/fleet/report.ts: nothing acknowledged lost,
// nothing twice, no caller failure, no 500, every 503 with Retry-After, no exit) is asserted, and
// the report with each fault's figures printed; the probes' p99 under the floods, a bar on time,
// is printed here and judged by the full `npm run fleet`.
//
// `npm run test:patroni` (in .ci/run: about four minutes, beyond npm test's budget).
import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'
import { runFleet } from '../../scripts/fleet/harness.ts'
import { type FleetReport, holds, renderFleet } from '../../scripts/fleet/report.ts'
import { debianProgram } from '../helpers/debian-program.ts'

/** The Debian packages the fleet is built from, and the programs of theirs it starts. */
const PACKAGES = 'patroni, etcd-server, haproxy, pgbouncer, postgresql-client, redis-server, wrk'
const REQUIRED = process.env.PETSTORE_REQUIRE_PATRONI === '1'
const programs = [
  'patroni',
  'patronictl',
  'etcd',
  'haproxy',
  'pgbouncer',
  'psql',
  'redis-server',
  'wrk',
]
const missing = programs.filter(
  (name) =>
    debianProgram({
      name,
      candidates: [`/usr/bin/${name}`, `/usr/sbin/${name}`],
      absent: `${name} is not installed`,
      required: { variable: 'PETSTORE_REQUIRE_PATRONI', set: false },
    }).binary() === undefined,
)
const skip =
  missing.length === 0
    ? undefined
    : `not installed: ${missing.join(', ')} (Debian packages ${PACKAGES})`
if (skip !== undefined && REQUIRED) {
  throw new Error(`${skip}; PETSTORE_REQUIRE_PATRONI=1 makes that a failure`)
}

describe('the fleet on Patroni (npm run fleet -- --quick)', { skip }, () => {
  let report: FleetReport

  before(async () => {
    report = await runFleet({ quick: true, log: (line) => console.log(line) })
    console.log(renderFleet(report).markdown)
  })

  test('the cluster ran as patroni.yml says: a leader, a synchronous standby, strict mode', () => {
    const { settings, roles } = report.patroni
    assert.equal(settings.synchronous_mode, true)
    assert.equal(settings.synchronous_mode_strict, true)
    const [ttl, loopWait, retry] = [settings.ttl, settings.loop_wait, settings.retry_timeout].map(
      Number,
    )
    assert.ok((ttl as number) > 0, 'ttl set')
    assert.ok(
      (loopWait as number) + 2 * (retry as number) <= (ttl as number),
      `loop_wait + 2 × retry_timeout ≤ ttl (${ttl})`,
    )
    assert.deepEqual(roles, ['leader', 'replica', 'sync_standby'])
  })

  test('every fault ran, each database fault with what Patroni did in its log', () => {
    const database = [
      'Switchover',
      'Postmaster SIGKILL',
      'Machine lost',
      'Lost member back',
      'One etcd member stopped',
      'etcd quorum lost',
      'PgBouncer restarted in a switchover',
    ]
    const names = report.phases.map((p) => p.name)
    for (const name of [
      ...database,
      'Rolling restart',
      'Instance SIGKILL',
      'Redis stopped',
      'Overload',
    ])
      assert.ok(names.includes(name), `${name} ran`)
    for (const phase of report.phases.filter(
      (p) => database.includes(p.name) && p.name !== 'One etcd member stopped',
    )) {
      assert.ok(phase.timeline?.length, `${phase.name}: Patroni logged what it did`)
    }
    assert.ok(report.totals.acknowledged > 0, 'creates were acknowledged')
  })

  test('what a fleet must hold, held (its bars on time are judged by the full run)', () => {
    const failed = holds(report).filter((h) => h.held === false && h.timed !== true)
    assert.deepEqual(
      failed.map((h) => `${h.what}: ${h.detail}`),
      [],
    )
  })
})
