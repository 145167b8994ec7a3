// D3: counting failed authentications per address stays bounded in memory whatever the number of
// addresses, and forgets in a stated order, however many times the bound has turned over: the
// in-memory counter forgets the address first counted in the window, the limit the address that
// failed longest ago. A flood of new addresses must push out only those.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { Clock } from '../../src/clock.ts'
import type { OutageLogger } from '../../src/outage-log.ts'
import { AuthFailureLimit } from '../../src/rate-limit/auth-failures.ts'
import { MemoryWindowCounter } from '../../src/rate-limit/counter.ts'

const BOUND = 100
/** Not a multiple of the bound, so that a ring's turn-over does not end on its first slot. */
const FLOOD = 50 * BOUND + 7

describe('the in-memory window counter at its bound', () => {
  it('holds the last `bound` keys first counted, after the bound has turned over fifty times', async () => {
    const counter = new MemoryWindowCounter(BOUND)
    for (let i = 0; i < FLOOD; i++) assert.equal(await counter.hit(`k${i}`, 0), 1)
    // Counted again, the newest keys are all still held (and nothing is forgotten: none is new).
    for (let i = FLOOD - BOUND; i < FLOOD; i++) assert.equal(await counter.hit(`k${i}`, 0), 2)
    // The key just before them was forgotten; counted anew, it pushes out the oldest held.
    assert.equal(await counter.hit(`k${FLOOD - BOUND - 1}`, 0), 1)
    assert.equal(await counter.hit(`k${FLOOD - BOUND}`, 0), 1)
    assert.equal(await counter.hit(`k${FLOOD - 1}`, 0), 3)
  })

  it('forgets in the order first counted: counting a key again does not keep it', async () => {
    const counter = new MemoryWindowCounter(BOUND)
    for (let i = 0; i < 5; i++) await counter.hit('busy', 0)
    for (let i = 0; i < BOUND - 1; i++) {
      await counter.hit(`k${i}`, 0)
      await counter.hit('busy', 0)
    }
    assert.equal(await counter.hit('busy', 0), 5 + BOUND)
    await counter.hit('one more', 0)
    assert.equal(await counter.hit('busy', 0), 1, 'the first counted is forgotten first')
  })

  it('starts its order again with each window', async () => {
    const counter = new MemoryWindowCounter(BOUND)
    for (let i = 0; i < 2 * BOUND + 3; i++) await counter.hit(`old${i}`, 0)
    for (let i = 0; i < BOUND; i++) assert.equal(await counter.hit(`new${i}`, 1), 1)
    for (let i = 0; i < BOUND; i++) assert.equal(await counter.hit(`new${i}`, 1), 2)
    await counter.hit('one more', 1)
    assert.equal(await counter.hit('new0', 1), 1, "the window's first key is its oldest")
    assert.equal(await counter.hit(`new${BOUND - 1}`, 1), 3)
  })

  it('is unbounded unless given a bound', async () => {
    const counter = new MemoryWindowCounter()
    for (let i = 0; i < FLOOD; i++) await counter.hit(`k${i}`, 0)
    assert.equal(await counter.hit('k0', 0), 2)
  })
})

describe('the failed-authentication limit at its bound of addresses', () => {
  const clock: Clock = { now: () => 0 }
  const log: OutageLogger = { error() {}, warn() {}, info() {} }
  const limitOf = (counter = new MemoryWindowCounter()) =>
    new AuthFailureLimit({ limit: 3, windowSeconds: 60, counter, clock, maxAddresses: BOUND })
  const failTimes = async (limit: AuthFailureLimit, address: string, times: number) => {
    for (let i = 0; i < times; i++) await limit.failed(address, log)
  }

  it('an address that keeps failing stays refused through fifty times the bound of others', async () => {
    const limit = limitOf()
    await failTimes(limit, '192.0.2.1', 3)
    for (let i = 0; i < FLOOD; i++) {
      await limit.failed(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, log)
      // Still refused here; its guesses that get through (another instance's) keep counting.
      if (i % (BOUND / 2) === 0) await limit.failed('192.0.2.1', log)
      assert.notEqual(limit.refusedFor('192.0.2.1'), undefined, `after ${i + 1} others`)
    }
  })

  it('forgets the address that failed longest ago, and no other', async () => {
    const limit = limitOf()
    const other = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`
    let next = 0
    const others = async (n: number) => {
      for (const end = next + n; next < end; next++) await limit.failed(other(next), log)
    }
    await others(FLOOD) // the bound turned over fifty times first
    await failTimes(limit, '192.0.2.1', 3)
    await failTimes(limit, '192.0.2.2', 3)
    await others(BOUND - 2)
    await limit.failed('192.0.2.1', log) // failed again: now the newest
    await others(1)
    assert.equal(limit.refusedFor('192.0.2.2'), undefined, 'failed longest ago: forgotten')
    assert.notEqual(limit.refusedFor('192.0.2.1'), undefined)
    await others(BOUND - 2)
    assert.notEqual(limit.refusedFor('192.0.2.1'), undefined, 'among the last 100 to fail')
    await others(1)
    assert.equal(limit.refusedFor('192.0.2.1'), undefined, 'now the one that failed longest ago')
  })

  it("a new window counts every address from nothing, keeping its own before the last one's", async () => {
    let now = 0
    const clock: Clock = { now: () => now }
    const limit = new AuthFailureLimit({
      ...{ limit: 3, windowSeconds: 60, counter: new MemoryWindowCounter(), clock },
      maxAddresses: BOUND,
    })
    for (let i = 0; i < BOUND; i++) await failTimes(limit, `10.0.0.${i}`, 3)
    assert.notEqual(limit.refusedFor('10.0.0.0'), undefined)
    now = 60_000
    for (let i = 0; i < BOUND; i++) assert.equal(limit.refusedFor(`10.0.0.${i}`), undefined)
    // The counter (unbounded here) counts on from nothing too: three more refuse again.
    await failTimes(limit, '192.0.2.1', 3)
    for (let i = 0; i < BOUND - 1; i++) await limit.failed(`10.1.0.${i}`, log)
    assert.notEqual(limit.refusedFor('192.0.2.1'), undefined, 'the last window made no room')
    await limit.failed('203.0.113.1', log)
    assert.equal(limit.refusedFor('192.0.2.1'), undefined, 'then the oldest of this one goes')
  })
})
