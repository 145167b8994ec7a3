// The store contract: every Store implementation runs these same tests against a real database.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { NewPet } from '../../src/contract/schemas.ts'
import { hashApiKey } from '../../src/keys/api-key.ts'
import { postgresMigrations } from '../../src/store/migrations/postgres.ts'
import { sqliteMigrations } from '../../src/store/migrations/sqlite.ts'
import type { Store } from '../../src/store/store.ts'

export interface StoreFixture {
  /** A new, empty, migrated-or-not store (the suite calls migrate). */
  open(): Promise<Store>
  /** Opens the same database again, as a restarted process would. */
  reopen(): Promise<Store>
  cleanup(): Promise<void>
}

const pet = (overrides: Partial<NewPet> = {}): NewPet => ({
  name: 'Rex',
  categoryId: 1,
  ...overrides,
})

export function storeContract(engine: string, makeFixture: () => Promise<StoreFixture>): void {
  describe(`store contract: ${engine}`, () => {
    let fixture: StoreFixture
    let store: Store

    before(async () => {
      fixture = await makeFixture()
      store = await fixture.open()
      const all = store.engine === 'sqlite' ? sqliteMigrations : postgresMigrations
      assert.deepEqual(
        await store.migrate(),
        all.map((migration) => migration.version),
        'the first migrate applies every version',
      )
    })
    after(async () => {
      await store.close()
      await fixture.cleanup()
    })

    test('migrate is idempotent', async () => {
      assert.deepEqual(await store.migrate(), [])
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
      const created = await Promise.all(
        Array.from({ length: 300 }, (_, i) => store.pets.create(pet({ name: `c${i}` }))),
      )
      const ids = new Set(created.map((p) => p.id))
      assert.equal(ids.size, 300)
      for (const p of created) assert.deepEqual(await store.pets.get(p.id), p)
    })

    test('list pages in id order with hasMore, by status, after an id', async () => {
      const fresh = await fixture.reopen()
      try {
        const start = (await fresh.pets.list({ limit: 100, afterId: 0 })).pets.length
        assert.ok(start >= 0)
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

    test('ping answers while open', async () => {
      await store.ping()
    })
  })
}
