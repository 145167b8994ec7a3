// While the shared counter fails, the limiter logs state changes, not every request: one
// warning when it starts failing, a reminder at most once a minute, one line when it recovers.
import assert from 'node:assert/strict'
import { beforeEach, describe, test } from 'node:test'
import { COUNTER_OUTAGE } from '../src/http/plugins/rate-limit.ts'
import { OutageLog, type OutageLogger } from '../src/outage-log.ts'
import { StoreOutages } from '../src/store/outages.ts'
import { StoreUnavailableError } from '../src/store/store.ts'
import { ManualClock } from './helpers/server.ts'

interface Line {
  level: 'error' | 'warn' | 'info'
  fields: Record<string, unknown>
  message: string
}

function recorder(): OutageLogger & { lines: Line[] } {
  const lines: Line[] = []
  return {
    lines,
    error: (fields, message) => lines.push({ level: 'error', fields: { ...fields }, message }),
    warn: (fields, message) => lines.push({ level: 'warn', fields: { ...fields }, message }),
    info: (fields, message) => lines.push({ level: 'info', fields: { ...fields }, message }),
  }
}

describe('OutageLog', () => {
  let clock: ManualClock
  let outages: OutageLog
  let log: ReturnType<typeof recorder>
  const down = new Error('connect ECONNREFUSED 127.0.0.1:6379')

  beforeEach(() => {
    clock = new ManualClock(Date.UTC(2027, 0, 1))
    outages = new OutageLog(clock, COUNTER_OUTAGE, 60_000)
    log = recorder()
  })

  test('nothing is logged while the counter works', () => {
    for (let i = 0; i < 5; i++) outages.succeeded(log)
    assert.deepEqual(log.lines, [])
  })

  test('an outage is one warning, however many requests it lets through', () => {
    for (let i = 0; i < 500; i++) {
      outages.failed(log, down)
      clock.advance(10)
    }
    assert.equal(log.lines.length, 1)
    const [warning] = log.lines
    assert.equal(warning?.level, 'warn')
    assert.match(warning?.message ?? '', /unreachable.*without a limit \(fail open\)/)
    assert.equal(warning?.fields.err, down)
  })

  test('a long outage repeats the warning at most once a minute, with a count', () => {
    for (let second = 0; second < 150; second++) {
      outages.failed(log, down)
      clock.advance(1000)
    }
    assert.deepEqual(
      log.lines.map((line) => [line.level, line.fields.requestsLetThrough]),
      [
        ['warn', 1],
        ['warn', 61],
        ['warn', 121],
      ],
    )
    assert.match(log.lines[1]?.message ?? '', /still unreachable/)
  })

  test('recovery is one line saying how many requests went through unlimited', () => {
    outages.failed(log, down)
    clock.advance(2500)
    outages.failed(log, down)
    outages.succeeded(log)
    outages.succeeded(log)
    assert.equal(log.lines.length, 2)
    const recovered = log.lines[1]
    assert.equal(recovered?.level, 'info')
    assert.match(recovered?.message ?? '', /reachable again/)
    assert.equal(recovered?.fields.requestsLetThrough, 2)
    assert.equal(recovered?.fields.failedForMs, 2500)
  })

  test('a flapping counter logs at most one warning and one recovery per interval', () => {
    for (let i = 0; i < 100; i++) {
      outages.failed(log, down)
      clock.advance(100)
      outages.succeeded(log)
      clock.advance(100)
    }
    // 100 flaps over 20 s: the first outage and its end, nothing more.
    assert.deepEqual(
      log.lines.map((line) => line.level),
      ['warn', 'info'],
    )
    clock.advance(60_000)
    outages.failed(log, down)
    outages.succeeded(log)
    assert.deepEqual(
      log.lines.map((line) => line.level),
      ['warn', 'info', 'warn', 'info'],
    )
  })
})

describe('StoreOutages tells its observer when the database fails and works again (D17)', () => {
  test('once per change, however many operations fail or succeed', () => {
    const told: boolean[] = []
    const outages = new StoreOutages()
    outages.observe({ committed() {}, unavailable: (failing) => told.push(failing) })
    outages.succeeded()
    assert.deepEqual(told, [], 'no outage to end')
    const err = new StoreUnavailableError('full', { reason: 'the database’s disk is full' })
    outages.failed(err)
    outages.failed(err, 5)
    assert.deepEqual(told, [true])
    outages.succeeded()
    outages.succeeded()
    outages.failed(err)
    assert.deepEqual(told, [true, false, true])
  })
})
