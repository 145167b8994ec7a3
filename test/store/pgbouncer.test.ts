// D19: the PostgreSQL store behind PgBouncer in transaction mode, where consecutive
// transactions of one client land on different server connections and one server connection
// serves many clients. The whole store contract runs through a pooler with fewer server
// connections than the stores hold; then what transaction pooling breaks in particular: named
// prepared statements, session settings, and a statement timeout that must still fire.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { postgresMigrations } from '../../src/store/postgres/migrations.ts'
import { openPostgresStore } from '../../src/store/postgres/store.ts'
import { type IdempotencyClaim, type Store, StoreUnavailableError } from '../../src/store/store.ts'
import { postgresLedger } from '../helpers/ledger.ts'
import { type PgBouncer, pgbouncerSkipReason, startPgBouncer } from '../helpers/pgbouncer.ts'
import {
  ADMIN_URL,
  createTestDatabase,
  onDatabase,
  postgresSkipReason,
  type TestDatabase,
} from '../helpers/postgres.ts'
import { storeContract } from './contract.ts'

const skip = (await postgresSkipReason()) ?? pgbouncerSkipReason()

/**
 * With the pets table locked from a direct connection to `url`, `attempt` fails as unavailable
 * because the server's statement timeout fired (57014), not the client's own wait.
 */
async function assertTimesOutOnLockedPets(url: string, attempt: () => Promise<unknown>) {
  await onDatabase(url, async (holder) => {
    await holder.query('BEGIN')
    await holder.query('LOCK TABLE pets IN ACCESS EXCLUSIVE MODE')
    try {
      const error = await attempt().then(
        () => undefined,
        (err: unknown) => err,
      )
      assert.ok(error instanceof StoreUnavailableError, `got ${error}`)
      assert.equal((error.cause as { code?: string }).code, '57014')
    } finally {
      await holder.query('ROLLBACK')
    }
  })
}

function claim(key: string): IdempotencyClaim {
  const now = new Date()
  return {
    apiKeyId: 'key_a',
    key,
    fingerprint: 'f',
    now,
    expiredAt: new Date(now.getTime() - 86_400_000),
    outcome: {
      status: 201,
      body: { before: '{"id":', after: '}' },
      location: { before: '/v1/pets/', after: '' },
    },
  }
}

describe('postgres behind PgBouncer (transaction mode)', { skip }, () => {
  let bouncer: PgBouncer

  before(async () => {
    // Two server connections for stores of five: clients always outnumber server connections.
    bouncer = await startPgBouncer({ poolSize: 2 })
  })
  after(async () => {
    await bouncer.stop()
  })

  storeContract('postgres through PgBouncer', async () => {
    const db = await createTestDatabase()
    const open = async () =>
      openPostgresStore({ url: bouncer.through(db.url), poolSize: 5, pooler: 'transaction' })
    return {
      migrations: postgresMigrations,
      open,
      reopen: open,
      // Written straight to the server: the ledger is the database's, whoever reads it.
      ledger: postgresLedger(db.url),
      another: async () => {
        const other = await createTestDatabase()
        return {
          open: async () =>
            openPostgresStore({
              url: bouncer.through(other.url),
              poolSize: 5,
              pooler: 'transaction',
            }),
          // Straight to the server, as the ledger is.
          exec: (sql) => onDatabase(other.url, async (client) => void (await client.query(sql))),
          cleanup: other.drop,
        }
      },
      cleanup: db.drop,
    }
  })

  describe('one server connection shared by two services', () => {
    let db: TestDatabase
    let single: PgBouncer
    let stores: Store[]

    before(async () => {
      db = await createTestDatabase()
      // One server connection: every statement of both stores runs on it, interleaved.
      single = await startPgBouncer({ poolSize: 1 })
      stores = [0, 1].map(() =>
        openPostgresStore({ url: single.through(db.url), poolSize: 5, pooler: 'transaction' }),
      )
      await Promise.all(stores.map((store) => store.migrate()))
    })
    after(async () => {
      await Promise.all(stores.map((store) => store.close()))
      await single.stop()
      await db.drop()
    })

    test('interleaved creates, reads and keyed creates all succeed (no named statements)', async () => {
      // With a named statement the second client to prepare it on the shared connection fails:
      // `prepared statement "pets_insert" already exists`.
      const work = Array.from({ length: 120 }, async (_, i) => {
        const store = stores[i % 2] as Store
        switch (i % 4) {
          case 0:
            return (await store.pets.create({ name: `p${i}`, categoryId: 1 })).id
          case 1:
            return (await store.pets.list({ limit: 5, afterId: 0 })).pets.length
          case 2: {
            const made = await store.pets.createIdempotent(
              { name: `k${i}`, categoryId: 2 },
              claim(`k${i}`),
            )
            return made.created?.id
          }
          default:
            return (await store.pets.get(1))?.id ?? 0
        }
      })
      const results = await Promise.all(work)
      assert.equal(results.length, 120)
      const { pets } = await (stores[0] as Store).pets.list({ limit: 100, afterId: 0 })
      assert.equal(pets.length, 60, 'every create and keyed create committed once')
    })

    test("a statement's own settings end with it: the next client sees the server's own", async () => {
      const made = await (stores[0] as Store).pets.createIdempotent(
        { name: 'after', categoryId: 3 },
        claim('settings'),
      )
      assert.ok(made.created)
      // The same, only, server connection that just ran the keyed create's local lock_timeout.
      const shown = await onDatabase(single.through(db.url), async (client) => {
        const { rows } = await client.query(
          "SELECT current_setting('statement_timeout') AS statement, current_setting('lock_timeout') AS lock",
        )
        return rows[0]
      })
      const server = await onDatabase(db.url, async (client) => {
        const { rows } = await client.query(
          "SELECT current_setting('statement_timeout') AS statement, current_setting('lock_timeout') AS lock",
        )
        return rows[0]
      })
      assert.deepEqual(shown, server)
    })
  })

  describe('timeouts behind the pooler', () => {
    test("a single statement gets the server's setting for the role or database, as the README says", async () => {
      // A single statement runs without BEGIN, so only the server's own setting can limit it
      // behind the pooler: here the database's (the README sets the role's; both apply when a
      // server connection starts). Set before the pooler opens any connection to it.
      const limited = await createTestDatabase()
      await onDatabase(ADMIN_URL, (client) =>
        client.query(`ALTER DATABASE ${limited.name} SET statement_timeout = 200`),
      )
      const plain = openPostgresStore({
        url: bouncer.through(limited.url),
        poolSize: 2,
        pooler: 'transaction',
      })
      try {
        await plain.migrate()
        await assertTimesOutOnLockedPets(limited.url, () =>
          plain.pets.create({ name: 'waits', categoryId: 1 }),
        )
        // The keyed create is one statement too (D14): the same setting bounds it.
        await assertTimesOutOnLockedPets(limited.url, () =>
          plain.pets.createIdempotent({ name: 'waits', categoryId: 1 }, claim('timeout')),
        )
      } finally {
        await plain.close()
        await limited.drop()
      }
    })
  })
})
