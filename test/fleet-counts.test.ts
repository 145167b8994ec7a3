// The fleet report's arithmetic (scripts/fleet): a fault's Jepsen counts come from the calls that
// began in its window and from the final read; Patroni's timeline keeps its decisions and drops
// the loop's routine; what must hold fails on any count not 0. All read from fixed evidence here;
// test/ha/patroni.ts runs them live.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Pet } from '../client/src/index.ts'
import { type Counts, countWindow, type Evidence } from '../scripts/fleet/counts.ts'
import { patroniTimeline } from '../scripts/fleet/patroni-log.ts'
import { type FleetReport, holds, type PhaseReport, renderFleet } from '../scripts/fleet/report.ts'
import { emptyRun, type StoredCheck } from './helpers/fleet-users.ts'

const stored = (over: Partial<StoredCheck> = {}): StoredCheck => ({
  stored: 0,
  lost: [],
  twice: [],
  unacknowledgedStored: 0,
  lostNames: [],
  unacknowledgedStoredNames: [],
  ...over,
})

test('a fault is charged with what began in its window, against the final read', () => {
  const users = emptyRun()
  const pet = (name: string, id: number): Pet => ({ id, name, categoryId: 1, status: 'available' })
  users.calls.push(
    { start: 5, end: 8, operation: 'create', name: 'u before' },
    { start: 10, end: 14, operation: 'create', name: 'u lost' },
    { start: 11, end: 30, operation: 'create', name: 'u failed', failure: 'PetstoreError: 503' },
    { start: 12, end: 13, operation: 'get' },
    { start: 40, end: 41, operation: 'create', name: 'u after' },
  )
  users.acknowledged.push(pet('u before', 1), pet('u lost', 2), pet('u after', 3))
  users.retries.push(11, 12, 45)
  users.errorAnswers.push(
    { at: 11, status: 503, retryAfter: true },
    { at: 12, status: 503, retryAfter: false },
    { at: 13, status: 500, retryAfter: false },
    { at: 45, status: 500, retryAfter: false },
  )
  const canary = emptyRun()
  canary.calls.push({ start: 15, end: 16, operation: 'create', name: 'c unknown', failure: 'x' })
  const evidence: Evidence = {
    users,
    canary,
    usersStored: stored({ lostNames: ['u lost'], twice: ['u before'] }),
    canaryStored: stored({ unacknowledgedStoredNames: ['c unknown'] }),
    exits: [
      { at: 20, what: 'instance 2 exited 1' },
      { at: 50, what: 'instance 3 exited 1' },
    ],
  }
  const counts = countWindow({ start: 10, end: 35 }, evidence)
  assert.equal(counts.acknowledged, 1, "'u lost' was acknowledged in the window")
  assert.equal(counts.lost, 1)
  assert.equal(counts.twice, 0, "'u before' began before the window")
  assert.equal(counts.unknown, 1, "the canary's failed create was stored")
  assert.equal(counts.calls, 3)
  assert.equal(counts.failures, 1)
  assert.deepEqual(counts.failureKinds, ['PetstoreError: 503'])
  assert.equal(counts.retries, 2)
  assert.deepEqual(counts.answers, { 500: 1, 503: 2 })
  assert.equal(counts.withoutRetryAfter, 1)
  assert.deepEqual(counts.exited, ['instance 2 exited 1'])
  // From 'u before' acknowledged at 8 to 'u lost' at 14; 'u after' ends past the window.
  assert.equal(counts.writeGapMs, 6)
})

test("Patroni's timeline: its decisions in the window, in order, each once, the routine left out", () => {
  const at = (clock: string) => new Date(`2026-12-07T${clock}`).getTime()
  const logs = new Map([
    [
      'member1',
      [
        '2026-12-07 10:00:00,000 INFO: no action. I am (member1), the leader with the lock',
        '2026-12-07 10:00:01,000 INFO: manual failover: demoting myself',
        '2026-12-07 10:00:01,500 INFO: Got response from member3 http://127.0.0.1:8008/patroni: {}',
        '2026-12-07 10:00:02,000 WARNING: Request to server http://127.0.0.1:2379 failed: x',
        '2026-12-07 10:00:02,100 WARNING: Request to server http://127.0.0.1:2380 failed: x',
        '  File "/usr/lib/python3/dist-packages/patroni/api.py", line 46, in _write_response',
        '2026-12-07 10:00:09,000 INFO: Lock owner: member2; I am member1',
      ].join('\n'),
    ],
    [
      'member2',
      [
        '2026-12-07 09:59:59,000 INFO: promoted self to leader by acquiring session lock',
        '2026-12-07 10:00:03,250 INFO: promoted self to leader by acquiring session lock',
        `2026-12-07 10:00:04,000 INFO: ${'x'.repeat(300)}`,
      ].join('\n'),
    ],
  ])
  const events = patroniTimeline(logs, at('10:00:00.500'), at('10:00:05.000'))
  assert.deepEqual(
    events.map((e) => [e.atMs, e.member, e.message.slice(0, 50)]),
    [
      [500, 'member1', 'manual failover: demoting myself'],
      [1_500, 'member1', 'Request to server http://127.0.0.1:2379 failed: x'],
      [2_750, 'member2', 'promoted self to leader by acquiring session lock'],
      [3_500, 'member2', 'x'.repeat(50)],
    ],
  )
  assert.ok((events.at(-1)?.message.length ?? 0) <= 141, 'a long message is cut')
})

test('what must hold: a count not 0 fails it, named by fault or as between the faults', () => {
  const counts = (over: Partial<Counts> = {}): Counts => ({
    acknowledged: 10,
    lost: 0,
    twice: 0,
    unknown: 0,
    calls: 30,
    failures: 0,
    failureKinds: [],
    retries: 0,
    answers: {},
    withoutRetryAfter: 0,
    exited: [],
    writeGapMs: 0,
    ...over,
  })
  const phase = (name: string, over: Partial<Counts> = {}): PhaseReport => ({
    name,
    what: '',
    notes: [],
    actedMs: 0,
    recoveredMs: 0,
    windowMs: 0,
    haproxy: { retries: 0, redispatches: 0, responses5xx: 0, queueMax: 0 },
    timeline: undefined,
    ...counts(over),
  })
  const report: FleetReport = {
    began: '',
    seconds: 0,
    quick: true,
    machine: { cpus: 2, memoryGb: 24 },
    versions: {},
    setup: { instances: 3, workers: 2, users: 32, userRetries: 30 },
    patroni: { settings: {}, roles: [] },
    phases: [phase('Switchover', { answers: { 500: 2 } }), phase('Machine lost')],
    floods: [],
    // One more 500 than the faults had: it came between them.
    totals: counts({ answers: { 500: 3 }, unknown: 2 }),
    canary: { creates: 5, acknowledged: 3 },
    probeTimeoutMs: 1_000,
    trace: {
      traceId: 't',
      continued: true,
      spans: [{ depth: 0, name: 'x', peer: 'p', durationMs: 1 }],
    },
  }
  const byWhat = new Map(holds(report).map((h) => [h.what, h]))
  assert.deepEqual(byWhat.get('No answer 500'), {
    what: 'No answer 500',
    held: false,
    detail: 'Switchover: 2 × 500; between the faults: 1 × 500',
  })
  assert.equal(byWhat.get('No acknowledged create lost')?.held, true)
  const unknown = [...byWhat.values()].find((h) => h.what.startsWith('Outcomes unknown'))
  assert.equal(unknown?.held, 'stated', 'an unknown outcome is reported, not a failure')
  assert.match(unknown?.detail ?? '', /^2 stored, of 2 canary creates that failed/)
  assert.equal(renderFleet(report).held, false)
})
