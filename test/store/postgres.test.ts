import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { openDatabase } from '../../src/store/postgres/connection.ts'
import { postgresMigrations } from '../../src/store/postgres/migrations.ts'
import { openPostgresStore } from '../../src/store/postgres/store.ts'
import {
  type IdempotencyClaim,
  IdempotencyKeyInUseError,
  type Store,
  StoreUnavailableError,
} from '../../src/store/store.ts'
import { postgresLedger } from '../helpers/ledger.ts'
import {
  createTestDatabase,
  onDatabase,
  postgresSkipReason,
  type TestDatabase,
} from '../helpers/postgres.ts'
import { storeContract } from './contract.ts'

const skip = await postgresSkipReason()

const open = (url: string) => openPostgresStore({ url, poolSize: 5 })

describe('postgres', { skip }, () => {
  storeContract('postgres', async () => {
    const db = await createTestDatabase()
    return {
      migrations: postgresMigrations,
      open: async () => open(db.url),
      reopen: async () => open(db.url),
      ledger: postgresLedger(db.url),
      another: async () => {
        const other = await createTestDatabase()
        return {
          open: async () => open(other.url),
          exec: (sql) => onDatabase(other.url, async (client) => void (await client.query(sql))),
          cleanup: other.drop,
        }
      },
      cleanup: db.drop,
    }
  })

  describe('postgres store specifics', () => {
    let db: TestDatabase
    let store: Store

    before(async () => {
      db = await createTestDatabase()
      store = open(db.url)
      await store.migrate()
    })
    after(async () => {
      await store.close()
      await db.drop()
    })

    test('a key whose record another transaction holds is in use once the lock wait ends (D14)', async () => {
      const claim: IdempotencyClaim = {
        apiKeyId: 'key_a',
        key: 'held',
        fingerprint: 'f',
        now: new Date(),
        expiredAt: new Date(Date.now() - 86_400_000),
        outcome: {
          status: 201,
          body: { before: '{"id":', after: '}' },
          location: { before: '/v1/pets/', after: '' },
        },
      }
      const pet = { name: 'waits for the key', categoryId: 1 }
      await onDatabase(db.url, async (holder) => {
        await holder.query('BEGIN')
        await holder.query(
          `INSERT INTO idempotency_keys (api_key_id, key, fingerprint, status, body, location, created_at)
            VALUES ($1, $2, 'f', 201, '{}', '/v1/pets/0', now())`,
          [claim.apiKeyId, claim.key],
        )
        try {
          await assert.rejects(store.pets.createIdempotent(pet, claim), IdempotencyKeyInUseError)
        } finally {
          await holder.query('ROLLBACK')
        }
      })
      // Nothing was written by the refused create: the key is free, and one pet is made.
      const made = await store.pets.createIdempotent(pet, claim)
      assert.ok(made.created)
      const { rows } = await onDatabase(db.url, (client) =>
        client.query('SELECT count(*)::int AS n FROM pets WHERE name = $1', [pet.name]),
      )
      assert.deepEqual(rows, [{ n: 1 }])
    })

    test('instances migrating at once apply each version once (advisory lock)', async () => {
      const fresh = await createTestDatabase()
      const stores = Array.from({ length: 4 }, () => open(fresh.url))
      try {
        const applied = await Promise.all(stores.map((s) => s.migrate()))
        const versions = postgresMigrations.map((migration) => migration.version)
        assert.deepEqual(
          applied.flatMap((run) => run.applied.map((migration) => migration.version)),
          versions,
          'exactly one migrate applied each version',
        )
        const { rows } = await onDatabase(fresh.url, (client) =>
          client.query('SELECT version FROM schema_migrations ORDER BY version'),
        )
        assert.deepEqual(
          rows,
          versions.map((version) => ({ version })),
        )
      } finally {
        await Promise.all(stores.map((s) => s.close()))
        await fresh.drop()
      }
    })

    test('an idle connection the server ends neither crashes the process nor the store', async () => {
      await store.ping()
      // 57P01 on the pool's idle connection: pg emits 'error' on the pool, which must be handled.
      const { rows } = await onDatabase(db.url, (client) =>
        client.query(
          "SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE datname = $1 AND application_name = 'petstore'",
          [db.name],
        ),
      )
      assert.ok(rows.length > 0 && rows.every((row) => row.ended === true))
      await new Promise((resolve) => setTimeout(resolve, 200))
      await store.ping()
      assert.ok(await store.pets.create({ name: 'after', categoryId: 1 }))
    })

    test("a reply that does not come in time: the store's own timeout answers unavailable, the connection dropped", async () => {
      // The client-side limit is the store's (connection.ts, send()), not pg's query_timeout
      // (D25): a reply later than it is 'Query read timeout', sorted as unreachable, and the
      // connection, still busy with the statement, is not given back to the pool.
      const session = { pooler: db.pooler, statementTimeoutMs: 5_000, queryTimeoutMs: 200 }
      const database = openDatabase(db.url, session, 1)
      try {
        assert.equal((await database.query({ name: 'one', text: 'SELECT 1' }, [])).rowCount, 1)
        await assert.rejects(
          database.query({ name: 'sleep', text: 'SELECT pg_sleep(1)' }, []),
          (err: unknown) =>
            err instanceof StoreUnavailableError &&
            (err.cause as Error | undefined)?.message === 'Query read timeout',
        )
        assert.deepEqual(database.poolStats(), { inUse: 0, idle: 0, waiting: 0 })
        assert.equal((await database.query({ name: 'one', text: 'SELECT 1' }, [])).rowCount, 1)
      } finally {
        await database.close()
      }
    })

    test('the schema refuses what the contract refuses', async () => {
      const bad = [
        "INSERT INTO pets (name, category_id) VALUES ('x', 0)",
        "INSERT INTO pets (name, category_id) VALUES ('x', 9007199254740992)",
        "INSERT INTO pets (name, category_id, status) VALUES ('x', 1, 'lost')",
        "INSERT INTO pets (id, name, category_id) VALUES (5, 'x', 1)",
      ]
      await onDatabase(db.url, async (client) => {
        for (const sql of bad) await assert.rejects(client.query(sql), sql)
      })
    })

    test('a filtered list is served by the (status, id) index', async () => {
      const plan = await onDatabase(db.url, async (client) => {
        // A near-empty table would be scanned whole; the planner must still be able to use it.
        await client.query('SET enable_seqscan = off')
        const { rows } = await client.query(
          "EXPLAIN SELECT id FROM pets WHERE status = 'sold' AND id > 10 ORDER BY id LIMIT 21",
        )
        return rows.map((row) => row['QUERY PLAN']).join('\n')
      })
      assert.match(plan, /pets_status_id/)
    })

    test('ids come back as numbers, exactly, up to 2^53 - 1', async () => {
      const created = await store.pets.create({ name: 'n', categoryId: Number.MAX_SAFE_INTEGER })
      assert.equal(typeof created.id, 'number')
      assert.equal((await store.pets.get(created.id))?.categoryId, Number.MAX_SAFE_INTEGER)
      assert.equal(typeof (await store.apiKeys.countActive()), 'number')
    })

    test('an unreachable server rejects with StoreUnavailableError, refused, not timed out', async () => {
      // Port 1 on loopback: nothing listens, so connecting is refused at once.
      const down = openPostgresStore({ url: 'postgres://postgres@127.0.0.1:1/none', poolSize: 2 })
      const refused = (err: unknown) =>
        err instanceof StoreUnavailableError &&
        /ECONNREFUSED/.test(String((err.cause as Error)?.message ?? err.cause))
      try {
        await assert.rejects(down.ping(), refused)
        await assert.rejects(async () => down.pets.get(1), refused)
        await assert.rejects(down.pets.create({ name: 'x', categoryId: 1 }), refused)
        await assert.rejects(down.migrate(), StoreUnavailableError)
      } finally {
        await down.close()
      }
    })

    test('a closed store rejects with StoreUnavailableError', async () => {
      const closed = open(db.url)
      await closed.close()
      await assert.rejects(closed.ping(), StoreUnavailableError)
      await assert.rejects(
        async () => closed.pets.list({ limit: 1, afterId: 0 }),
        StoreUnavailableError,
      )
    })

    test('a statement past the timeout is cancelled as unavailable, not left hanging', async () => {
      // Hold a row lock so the store's UPDATE waits until the statement timeout fires: the
      // server's cancel (SQLSTATE 57014 query_canceled), not the client giving up on a reply.
      const key = await store.apiKeys.create({ id: 'key_lock', name: 'l', hint: 'h', hash: 'x' })
      const impatient = openPostgresStore({ url: db.url, poolSize: 1, statementTimeoutMs: 200 })
      try {
        await onDatabase(db.url, async (client) => {
          await client.query('BEGIN')
          await client.query('SELECT * FROM api_keys WHERE id = $1 FOR UPDATE', [key.id])
          await assert.rejects(
            impatient.apiKeys.revoke(key.id),
            (err: unknown) =>
              err instanceof StoreUnavailableError &&
              (err.cause as { code?: string } | undefined)?.code === '57014',
          )
          await client.query('ROLLBACK')
        })
        assert.equal(await impatient.apiKeys.revoke(key.id), true, 'the lock gone, it goes through')
      } finally {
        await impatient.close()
      }
    })
  })
})
