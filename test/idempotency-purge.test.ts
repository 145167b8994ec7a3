// D14: the background purge of expired Idempotency-Key records, on the test engine's real store.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { IdempotencyPurge } from '../src/store/idempotency-purge.ts'
import type { PetRepository } from '../src/store/store.ts'
import { ManualClock, openTestStore, type TestStore } from './helpers/server.ts'

const TTL_SECONDS = 60

describe('idempotency purge (D14)', () => {
  let database: TestStore
  const clock = new ManualClock(Date.UTC(2027, 0, 1))

  before(async () => {
    database = await openTestStore()
    await database.store.migrate()
  })
  after(() => database.close())

  async function record(key: string): Promise<void> {
    const now = clock.now()
    await database.store.pets.createIdempotent(
      { name: 'P', categoryId: 1 },
      {
        apiKeyId: 'key_purge',
        key,
        fingerprint: 'f',
        now: new Date(now),
        expiredAt: new Date(now - TTL_SECONDS * 1000),
        outcome: {
          status: 201,
          body: { before: '{"id":', after: ',"name":"P","categoryId":1}' },
          location: { before: '/v1/pets/', after: '' },
        },
      },
    )
  }

  it('deletes every expired record in batches of the batch size, and no live one', async () => {
    for (let i = 0; i < 23; i++) await record(`old-${i}`)
    clock.advance(TTL_SECONDS * 1000)
    for (let i = 0; i < 4; i++) await record(`live-${i}`)
    const pets = database.store.pets
    const batches: number[] = []
    const counting: Pick<PetRepository, 'purgeIdempotencyRecords'> = {
      purgeIdempotencyRecords: async (expiredAt, limit) => {
        const n = await pets.purgeIdempotencyRecords(expiredAt, limit)
        batches.push(n)
        return n
      },
    }
    const purge = new IdempotencyPurge({
      pets: counting,
      clock,
      ttlSeconds: TTL_SECONDS,
      batchSize: 10,
    })
    assert.equal(await purge.runOnce(), 23)
    assert.deepEqual(batches, [10, 10, 3])
    assert.equal(await purge.runOnce(), 0)
    // The live records expire a TTL later, and go then.
    clock.advance(TTL_SECONDS * 1000)
    assert.equal(await purge.runOnce(), 4)
    await purge.stop()
  })

  it('runs on its interval until stopped', async () => {
    await record('timed')
    clock.advance(TTL_SECONDS * 1000)
    let calls = 0
    const pets = database.store.pets
    const purge = new IdempotencyPurge({
      pets: {
        purgeIdempotencyRecords: (expiredAt, limit) => {
          calls++
          return pets.purgeIdempotencyRecords(expiredAt, limit)
        },
      },
      clock,
      ttlSeconds: TTL_SECONDS,
      intervalMs: 10,
    })
    purge.start()
    while (calls < 2) await new Promise((resolve) => setTimeout(resolve, 10))
    await purge.stop()
    const stoppedAt = calls
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.equal(calls, stoppedAt, 'no round after stop')
    assert.equal(await pets.purgeIdempotencyRecords(new Date(clock.now()), 100), 0, 'purged')
  })
})
