// The store contract: every Store implementation runs these same tests against a real database.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { hashApiKey } from '../../src/contract/api-key.ts'
import type { NewPet } from '../../src/contract/schemas.ts'
import { petJsonAroundId } from '../../src/http/routes/pets-json.ts'
import { DatabaseEnvironmentError, EnvironmentRecordError } from '../../src/store/environment.ts'
import { type LedgerEntry, type Migration, SchemaTooNewError } from '../../src/store/migrations.ts'
import { NotStagingDatabaseError } from '../../src/store/staging.ts'
import type { IdempotencyClaim, Store } from '../../src/store/store.ts'

export interface StoreFixture {
  /** The engine's migrations: what the first migrate() must apply. */
  migrations: readonly Migration[]
  /** A new, empty, migrated-or-not store (the suite calls migrate). */
  open(): Promise<Store>
  /** Opens the same database again, as a restarted process would. */
  reopen(): Promise<Store>
  /** Writes a ledger row as a newer release would, or takes one out (D27). */
  ledger: {
    add(entry: LedgerEntry): Promise<void>
    remove(version: number): Promise<void>
  }
  /**
   * Another new, empty database beside the first, for what only a database's making shows (the
   * environment it records): its store, not migrated yet, and SQL run on it as another client
   * would (sqlite3, psql).
   */
  another(): Promise<OtherDatabase>
  cleanup(): Promise<void>
}

export interface OtherDatabase {
  open(): Promise<Store>
  exec(sql: string): Promise<void>
  cleanup(): Promise<void>
}

const pet = (overrides: Partial<NewPet> = {}): NewPet => ({
  name: 'Rex',
  categoryId: 1,
  ...overrides,
})

const DAY_MS = 24 * 60 * 60 * 1000

let keySeq = 0
/** A key no other test uses. */
const newKey = (label: string) => `${label}-${Date.now()}-${++keySeq}`

/**
 * A claim as the route makes it for `newPet`: the outcome is the 201 with the pet and its
 * Location, given as text around the id the store will assign.
 */
function claim(
  key: string,
  overrides: Partial<IdempotencyClaim> = {},
  newPet: NewPet = pet(),
): IdempotencyClaim {
  const now = overrides.now ?? new Date()
  return {
    apiKeyId: 'key_a',
    key,
    fingerprint: 'f1',
    now,
    expiredAt: new Date(now.getTime() - DAY_MS),
    outcome: {
      status: 201,
      body: petJsonAroundId(newPet),
      location: { before: '/v1/pets/', after: '' },
    },
    ...overrides,
  }
}

export function storeContract(engine: string, makeFixture: () => Promise<StoreFixture>): void {
  describe(`store contract: ${engine}`, () => {
    let fixture: StoreFixture
    let store: Store

    before(async () => {
      fixture = await makeFixture()
      store = await fixture.open()
      const state = await store.schema()
      assert.deepEqual(state.applied, [], 'a new database has no ledger')
      assert.deepEqual(
        state.pending.map((migration) => migration.version),
        fixture.migrations.map((migration) => migration.version),
      )
      // Made by a staging process: the last tests reset and seed it.
      const run = await store.migrate('staging')
      assert.deepEqual(
        run.applied.map((migration) => migration.version),
        fixture.migrations.map((migration) => migration.version),
        'the first migrate applies every version',
      )
      assert.ok(run.applied.every((migration) => migration.durationMs >= 0))
      assert.deepEqual(run.newer, [])
    })
    after(async () => {
      await store.close()
      await fixture.cleanup()
    })

    test('migrate is idempotent', async () => {
      assert.deepEqual(await store.migrate('staging'), {
        applied: [],
        newer: [],
        environment: 'staging',
      })
    })

    test('the ledger says of each migration whether releases before it may serve (D27)', async () => {
      const state = await store.schema()
      assert.deepEqual(state.pending, [])
      assert.deepEqual(state.newer, [])
      assert.deepEqual(
        state.applied,
        fixture.migrations.map(({ version, name, olderReleasesMayServe }) => ({
          version,
          name,
          olderReleasesMayServe,
        })),
      )
    })

    test("a newer release's expand step is served; its contract step is refused, changing nothing (D27)", async () => {
      const expand = { version: 900, name: 'a new table', olderReleasesMayServe: true }
      const contract = { version: 901, name: 'a dropped column', olderReleasesMayServe: false }
      try {
        await fixture.ledger.add(expand)
        assert.deepEqual(await store.migrate('staging'), {
          applied: [],
          newer: [expand],
          environment: 'staging',
        })
        assert.deepEqual((await store.schema()).newer, [expand])

        await fixture.ledger.add(contract)
        await assert.rejects(store.migrate('staging'), (err: Error) => {
          assert.ok(err instanceof SchemaTooNewError)
          assert.match(err.message, /901 \(a dropped column\)/)
          assert.match(err.message, /Upgrade this instance .* or restore/)
          assert.equal(err.message.includes('\n'), false, 'one line')
          return true
        })
        const after = await store.schema()
        assert.deepEqual(after.newer, [expand, contract])
        assert.deepEqual(after.pending, [])
      } finally {
        await fixture.ledger.remove(expand.version)
        await fixture.ledger.remove(contract.version)
      }
      assert.deepEqual(await store.migrate('staging'), {
        applied: [],
        newer: [],
        environment: 'staging',
      })
    })

    test('create returns the pet with a new id; an omitted status stays omitted', async () => {
      const a = await store.pets.create(pet({ name: 'A', categoryId: 7, status: 'sold' }))
      const b = await store.pets.create(pet({ name: 'B' }))
      assert.deepEqual(a, { id: a.id, name: 'A', categoryId: 7, status: 'sold' })
      assert.ok(b.id > a.id)
      assert.equal('status' in b, false)
      assert.deepEqual(await store.pets.get(b.id), b)
      assert.equal('status' in ((await store.pets.get(b.id)) ?? {}), false)
    })

    test('get of an unknown id is undefined', async () => {
      assert.equal(await store.pets.get(Number.MAX_SAFE_INTEGER), undefined)
    })

    test('text and the largest categoryId round-trip exactly', async () => {
      const names = [
        '🐶‍🦺 🇯🇵',
        '小狗',
        'كلب',
        'כֶּלֶב',
        `"quoted" \\ 'single' </script>`,
        'a'.repeat(200),
      ]
      for (const name of names) {
        const created = await store.pets.create(pet({ name, categoryId: Number.MAX_SAFE_INTEGER }))
        assert.deepEqual(await store.pets.get(created.id), created)
      }
    })

    test('concurrent creates all commit with distinct ids', async () => {
      // Ten times a pool's connections, all at once: enough to queue and contend. More (it was
      // 300) queue past the store's 2 s wait for a connection on a busy CI machine behind
      // PgBouncer's five, which is the store saying "unavailable" as designed, not a store bug.
      const count = 100
      const created = await Promise.all(
        Array.from({ length: count }, (_, i) => store.pets.create(pet({ name: `c${i}` }))),
      )
      const ids = new Set(created.map((p) => p.id))
      assert.equal(ids.size, count)
      for (const p of created) assert.deepEqual(await store.pets.get(p.id), p)
    })

    test('list pages in id order with hasMore, by status, after an id', async () => {
      const fresh = await fixture.reopen()
      try {
        // Reopened, as a restarted process would, the database holds what the first store
        // committed in the tests before this one.
        const first = { limit: 100, afterId: 0 }
        assert.deepEqual(await fresh.pets.list(first), await store.pets.list(first))
        const statuses = ['available', 'pending', 'sold', undefined] as const
        const made = []
        for (let i = 0; i < 40; i++) {
          const status = statuses[i % 4]
          made.push(
            await fresh.pets.create(
              status ? pet({ name: `l${i}`, status }) : pet({ name: `l${i}` }),
            ),
          )
        }
        const firstId = made[0]?.id ?? 0
        const walk = async (status?: 'pending') => {
          const seen = []
          let afterId = firstId - 1
          for (;;) {
            const page = await fresh.pets.list({ limit: 7, status, afterId })
            assert.ok(page.pets.length <= 7)
            seen.push(...page.pets)
            const last = page.pets.at(-1)
            if (!page.hasMore || last === undefined) break
            afterId = last.id
          }
          return seen
        }
        const all = await walk()
        assert.deepEqual(all, made)
        const pending = await walk('pending')
        assert.deepEqual(
          pending,
          made.filter((p) => p.status === 'pending'),
        )
        const last = made.at(-1)
        assert.deepEqual(await fresh.pets.list({ limit: 5, afterId: last?.id ?? 0 }), {
          pets: [],
          hasMore: false,
        })
      } finally {
        await fresh.close()
      }
    })

    test('api keys: create, find by hash, list, revoke, count', async () => {
      const before = await store.apiKeys.countActive()
      const hash = hashApiKey(`contract-key-${engine}-${Date.now()}`)
      const record = await store.apiKeys.create({
        id: `key_${Date.now()}`,
        name: 'ci',
        hint: 'x…abcd',
        hash,
      })
      assert.equal(record.name, 'ci')
      assert.equal(await store.apiKeys.findActiveByHash(hash), record.id)
      assert.equal(await store.apiKeys.findActiveByHash(hashApiKey('nope')), undefined)
      assert.equal(await store.apiKeys.countActive(), before + 1)
      const listed = (await store.apiKeys.list()).find((k) => k.id === record.id)
      assert.equal(listed?.hint, 'x…abcd')
      assert.equal(listed?.revokedAt, undefined)
      assert.equal(await store.apiKeys.revoke(record.id), true)
      assert.equal(
        await store.apiKeys.revoke(record.id),
        false,
        'a second revoke finds nothing active',
      )
      assert.equal(await store.apiKeys.findActiveByHash(hash), undefined)
      assert.ok(
        (await store.apiKeys.list()).find((k) => k.id === record.id)?.revokedAt instanceof Date,
      )
      assert.equal(await store.apiKeys.countActive(), before)
    })

    test('api keys: the first key is made once, by one of many processes starting together', async () => {
      // As on an empty database: no active key (the suite's tests share one database).
      for (const key of await store.apiKeys.list()) await store.apiKeys.revoke(key.id)
      const processes = await Promise.all(Array.from({ length: 6 }, () => fixture.reopen()))
      try {
        const made = await Promise.all(
          processes.map((other, i) =>
            other.apiKeys.createFirst({
              id: `key_first${i}`,
              name: 'initial',
              hint: 'x…first',
              hash: hashApiKey(`first-key-${engine}-${Date.now()}-${i}`),
            }),
          ),
        )
        assert.equal(made.filter((record) => record !== undefined).length, 1, 'one key made')
        assert.equal(await store.apiKeys.countActive(), 1)
        const again = await store.apiKeys.createFirst({
          id: 'key_firstagain',
          name: 'initial',
          hint: 'x…again',
          hash: hashApiKey(`first-key-again-${engine}-${Date.now()}`),
        })
        assert.equal(again, undefined, 'none made while a key is active')
      } finally {
        await Promise.all(processes.map((other) => other.close()))
      }
    })

    test('close waits for creates still queued; a reopened store has them', async () => {
      const other = await fixture.reopen()
      const pending = Array.from({ length: 50 }, (_, i) =>
        other.pets.create(pet({ name: `q${i}` })),
      )
      await other.close()
      const created = await Promise.all(pending)
      const again = await fixture.reopen()
      try {
        for (const p of created) assert.deepEqual(await again.pets.get(p.id), p)
      } finally {
        await again.close()
      }
    })

    test('idempotent create: the first stores its outcome, a repeat finds it', async () => {
      const key = newKey('first')
      const first = await store.pets.createIdempotent(
        pet({ name: 'I1' }),
        claim(key, {}, pet({ name: 'I1' })),
      )
      const made = first.created
      assert.ok(made !== undefined)
      assert.deepEqual(await store.pets.get(made.id), made)
      const again = await store.pets.createIdempotent(
        pet({ name: 'I1' }),
        claim(key, {}, pet({ name: 'I1' })),
      )
      assert.equal(again.created, undefined, 'no second pet')
      assert.equal(again.found?.fingerprint, 'f1')
      assert.equal(again.found?.status, 201)
      assert.deepEqual(JSON.parse(again.found?.body ?? ''), made)
      assert.equal(again.found?.location, `/v1/pets/${made.id}`)
      assert.ok(again.found?.createdAt instanceof Date)
      // Another request under the key: the record is returned all the same (the route refuses it).
      const other = await store.pets.createIdempotent(
        pet({ name: 'other' }),
        claim(key, { fingerprint: 'f2' }),
      )
      assert.equal(other.found?.fingerprint, 'f1')
      const page = await store.pets.list({ limit: 10, afterId: made.id })
      assert.deepEqual(page.pets, [], 'no pet was made after the first')
    })

    test('idempotent create: a key is scoped to its API key', async () => {
      const key = newKey('scoped')
      const a = await store.pets.createIdempotent(pet(), claim(key, { apiKeyId: 'key_a' }))
      const b = await store.pets.createIdempotent(pet(), claim(key, { apiKeyId: 'key_b' }))
      assert.ok(a.created !== undefined && b.created !== undefined)
      assert.notEqual(a.created.id, b.created.id)
    })

    test('idempotent create: concurrent claims on one key make one pet', async () => {
      const key = newKey('race')
      const results = await Promise.all(
        Array.from({ length: 30 }, () =>
          store.pets.createIdempotent(pet({ name: 'race' }), claim(key, {}, pet({ name: 'race' }))),
        ),
      )
      const created = results.flatMap((r) => (r.created === undefined ? [] : [r.created]))
      assert.equal(created.length, 1, 'exactly one claim inserts')
      const body = JSON.stringify(created[0])
      for (const r of results) if (r.found !== undefined) assert.equal(r.found.body, body)
    })

    test('idempotent create: an expired record leaves the key new again', async () => {
      const key = newKey('expired')
      const t0 = new Date('2020-01-01T00:00:00Z')
      const first = await store.pets.createIdempotent(pet(), claim(key, { now: t0 }))
      // One millisecond before expiry it is live; at expiry it is gone.
      const live = new Date(t0.getTime() + DAY_MS - 1)
      const stillLive = await store.pets.createIdempotent(pet(), claim(key, { now: live }))
      assert.deepEqual(JSON.parse(stillLive.found?.body ?? ''), first.created)
      const later = new Date(t0.getTime() + DAY_MS)
      const fresh = await store.pets.createIdempotent(pet(), claim(key, { now: later }))
      assert.ok(fresh.created !== undefined && first.created !== undefined)
      assert.notEqual(fresh.created.id, first.created.id)
      const after = await store.pets.createIdempotent(pet(), claim(key, { now: later }))
      assert.deepEqual(JSON.parse(after.found?.body ?? ''), fresh.created)
    })

    test('idempotent create: a reopened store replays what was committed', async () => {
      const key = newKey('restart')
      const first = await store.pets.createIdempotent(pet(), claim(key))
      const again = await fixture.reopen()
      try {
        const replay = await again.pets.createIdempotent(pet(), claim(key))
        assert.deepEqual(JSON.parse(replay.found?.body ?? ''), first.created)
      } finally {
        await again.close()
      }
    })

    test('purge deletes expired records in batches of at most the limit', async () => {
      // Records from 2001, older than any other test's.
      const old = new Date('2001-01-01T00:00:00Z')
      const keys = Array.from({ length: 5 }, (_, i) => newKey(`purge${i}`))
      for (const key of keys) await store.pets.createIdempotent(pet(), claim(key, { now: old }))
      const cutoff = new Date('2001-01-02T00:00:00Z')
      const live = new Date('2000-12-01T00:00:00Z')
      assert.equal(await store.pets.purgeIdempotencyRecords(cutoff, 2), 2)
      assert.equal(await store.pets.purgeIdempotencyRecords(cutoff, 2), 2)
      assert.equal(await store.pets.purgeIdempotencyRecords(cutoff, 2), 1)
      assert.equal(await store.pets.purgeIdempotencyRecords(cutoff, 2), 0)
      // Purged: a claim that would still see them live (an early expiredAt) makes a new pet.
      for (const key of keys) {
        const r = await store.pets.createIdempotent(
          pet(),
          claim(key, { now: old, expiredAt: live }),
        )
        assert.ok(r.created !== undefined, 'the purged key is new again')
      }
      assert.equal(await store.pets.purgeIdempotencyRecords(cutoff, 100), 5)
    })

    test('ping answers while open', async () => {
      await store.ping()
    })

    test('a new database records who made it; later migrations never change it (issue 49)', async () => {
      assert.equal(await store.environment.read(), 'staging')
      assert.equal((await store.schema()).environment, 'staging')
      assert.deepEqual((await store.migrate('staging')).environment, 'staging')
      assert.equal(await store.environment.read(), 'staging')
    })

    test("production's migrations refuse a database staging made, changing nothing; record() is the way to change it (issue 53)", async () => {
      const before = await store.schema()
      await assert.rejects(store.migrate('production'), (err: Error) => {
        assert.ok(err instanceof DatabaseEnvironmentError, String(err))
        assert.equal(err.recorded, 'staging')
        assert.equal(err.environment, 'production')
        assert.match(err.message, /petstore environment record production --yes/)
        assert.equal(err.message.includes('\n'), false, 'one line')
        return true
      })
      assert.deepEqual(await store.schema(), before)
      assert.equal(await store.environment.read(), 'staging')

      assert.equal(await store.environment.record('production'), 'staging', 'what it said')
      assert.equal((await store.migrate('production')).environment, 'production')
      assert.equal(await store.environment.record('production'), 'production')
      // Back to staging's, for the tests after this one.
      assert.equal(await store.environment.record('staging'), 'production')
      assert.equal(await store.environment.read(), 'staging')
    })

    /** `work` on a database of its own, closed and removed afterwards. */
    async function onAnother(work: (other: OtherDatabase, store: Store) => Promise<void>) {
      const other = await fixture.another()
      const opened = await other.open()
      try {
        await work(other, opened)
      } finally {
        await opened.close()
        await other.cleanup()
      }
    }

    /** reset() and seed() refuse as NotStagingDatabaseError, naming what was recorded. */
    async function assertRefused(on: Store, recorded: 'production' | undefined) {
      const refused = (err: unknown) => {
        assert.ok(err instanceof NotStagingDatabaseError, String(err))
        assert.equal(err.recorded, recorded)
        assert.equal(err.message.includes('\n'), false, 'one line')
        return true
      }
      await assert.rejects(on.staging.reset(), refused)
      await assert.rejects(on.staging.seed([pet({ name: 'not seeded' })]), refused)
    }

    test('a database made by production, or before migration 5: reset and seed refuse, changing nothing (issue 49)', async () => {
      // One database for both (a new one is the slow part on PostgreSQL): made by production,
      // then taken back to how the release before migration 5 left it.
      await onAnother(async (database, other) => {
        // Without an environment: production, the side on which staging commands refuse.
        await other.migrate()
        assert.equal(await other.environment.read(), 'production')
        const kept = await other.pets.create(pet({ name: 'production pet' }))
        const key = newKey('production')
        const keyed = await other.pets.createIdempotent(pet(), claim(key))
        await assertRefused(other, 'production')
        assert.deepEqual((await other.pets.list({ limit: 10, afterId: 0 })).pets, [
          kept,
          keyed.created,
        ])
        const replay = await other.pets.createIdempotent(pet(), claim(key))
        assert.deepEqual(JSON.parse(replay.found?.body ?? ''), keyed.created, 'its record kept')

        // Before migration 5: the ledger at 4, no table. Migrated now, it records nothing: a
        // database with a ledger was made by someone this release cannot know.
        await database.exec('DROP TABLE database_environment')
        await database.exec('DELETE FROM schema_migrations WHERE version = 5')
        assert.equal(await other.environment.read(), undefined, 'read before migrating')
        await assertRefused(other, undefined)
        await assert.rejects(other.environment.record('staging'), (err: Error) => {
          assert.ok(err instanceof EnvironmentRecordError, String(err))
          assert.match(err.message, /run "petstore migrate" first; nothing was changed$/)
          return true
        })
        const run = await other.migrate('staging')
        assert.deepEqual(
          run.applied.map((migration) => migration.version),
          [5],
        )
        assert.equal(run.environment, undefined, 'nothing recorded')
        assert.equal(await other.environment.read(), undefined)
        await assertRefused(other, undefined)
        assert.deepEqual(await other.pets.get(kept.id), kept)
      })
    })

    test("seed creates the pets in the array's order, in one transaction, after those there (issue 49)", async () => {
      const statuses = ['available', 'pending', 'sold', undefined] as const
      const pets = Array.from({ length: 12_001 }, (_, i) => {
        const status = statuses[i % 4]
        return pet({
          name: `seed ${i}`,
          categoryId: (i % 7) + 1,
          ...(status === undefined ? {} : { status }),
        })
      })
      const seeded = await store.staging.seed(pets)
      const firstId = seeded.firstId ?? 0
      assert.equal(seeded.count, pets.length)
      assert.equal(seeded.lastId, firstId + pets.length - 1, 'one id after another')
      const page = await store.pets.list({ limit: 100, afterId: firstId - 1 })
      assert.deepEqual(
        page.pets,
        pets.slice(0, 100).map((made, i) => ({ id: firstId + i, ...made })),
      )
      assert.deepEqual(await store.pets.get(seeded.lastId ?? 0), {
        id: seeded.lastId,
        ...pets.at(-1),
      })
      assert.equal(await store.pets.get((seeded.lastId ?? 0) + 1), undefined)
      const more = await store.staging.seed([pet({ name: 'after' })])
      assert.deepEqual(more, {
        count: 1,
        firstId: (seeded.lastId ?? 0) + 1,
        lastId: (seeded.lastId ?? 0) + 1,
      })
      assert.deepEqual(await store.staging.seed([]), {
        count: 0,
        firstId: undefined,
        lastId: undefined,
      })
      // All or none: a pet the database refuses (categoryId 0) undoes the ones before it.
      await assert.rejects(
        store.staging.seed([pet({ name: 'undone' }), pet({ name: 'refused', categoryId: 0 })]),
      )
      assert.deepEqual(
        (await store.pets.list({ limit: 10, afterId: (seeded.lastId ?? 0) + 1 })).pets,
        [],
      )
    })

    test('reset deletes every pet and Idempotency-Key record, keeps the API keys; ids start again at 1 (issue 49)', async () => {
      let pets = 0
      for (let afterId = 0; ; ) {
        const page = await store.pets.list({ limit: 100, afterId })
        pets += page.pets.length
        const last = page.pets.at(-1)
        if (!page.hasMore || last === undefined) break
        afterId = last.id
      }
      const key = newKey('reset')
      const keyed = await store.pets.createIdempotent(pet(), claim(key))
      assert.ok(keyed.created !== undefined)
      const hash = hashApiKey(`reset-key-${engine}-${Date.now()}`)
      const apiKey = await store.apiKeys.create({
        id: `key_r${Date.now()}`,
        name: 'kept',
        hint: 'x…keep',
        hash,
      })
      const keys = await store.apiKeys.list()

      const deleted = await store.staging.reset()
      assert.equal(deleted.pets, pets + 1)
      assert.ok(deleted.idempotencyRecords >= 1, 'the records of the tests before it')
      assert.deepEqual(await store.pets.list({ limit: 10, afterId: 0 }), {
        pets: [],
        hasMore: false,
      })
      assert.deepEqual(await store.apiKeys.list(), keys)
      assert.equal(await store.apiKeys.findActiveByHash(hash), apiKey.id)
      assert.deepEqual(await store.staging.reset(), { pets: 0, idempotencyRecords: 0 })

      const seeded = await store.staging.seed([pet({ name: 'one' }), pet({ name: 'two' })])
      assert.deepEqual(seeded, { count: 2, firstId: 1, lastId: 2 })
      assert.deepEqual(await store.pets.get(1), { id: 1, name: 'one', categoryId: 1 })
      // The record is gone: the key is new again and makes the next pet.
      const again = await store.pets.createIdempotent(pet(), claim(key))
      assert.equal(again.created?.id, 3)
      assert.equal(await store.environment.read(), 'staging')
    })
  })
}
