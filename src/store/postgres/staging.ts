// D29 on PostgreSQL: a staging database emptied and seeded (../staging.ts), each in one
// transaction on one connection of the pool (kept on one server connection by a transaction-mode
// pooler, D19), which first reads who made the database and refuses, changing nothing, unless it
// was staging.
import type { NewPet } from '../../contract/schemas.ts'
import {
  NotStagingDatabaseError,
  type ResetCounts,
  type SeededPets,
  type StagingData,
  StagingDataError,
} from '../staging.ts'
import type { Database, Statement, TransactionQuery } from './connection.ts'
import { INSUFFICIENT_PRIVILEGE, readEnvironment } from './environment.ts'

/**
 * Pets per INSERT while seeding: a statement's arrays stay a few hundred kilobytes, and each
 * statement ends well inside the statement timeout.
 */
export const SEED_BATCH = 5_000

const STAGING_SQL = {
  // Taken before counting, so that the counts are what TRUNCATE deletes: it waits for the
  // statements under way, and creates wait for it (bounded by their timeouts).
  lockForReset: {
    name: 'staging_lock_reset',
    text: 'LOCK TABLE pets, idempotency_keys IN ACCESS EXCLUSIVE MODE',
  },
  count: {
    name: 'staging_count',
    text: 'SELECT (SELECT count(*) FROM pets) AS pets, (SELECT count(*) FROM idempotency_keys) AS records',
  },
  // RESTART IDENTITY: the pets' ids start again at 1, with the truncation, in the transaction
  // (a setval() would not be rolled back with it). It needs the role that owns the tables.
  truncate: {
    name: 'staging_truncate',
    text: 'TRUNCATE pets, idempotency_keys RESTART IDENTITY',
  },
  // Other creates wait until the seed commits (reads do not), so its ids follow one another.
  lockForSeed: {
    name: 'staging_lock_seed',
    text: 'LOCK TABLE pets IN SHARE ROW EXCLUSIVE MODE',
  },
  // One batch: the arrays' elements in their order (ORDINALITY), so each row draws its id from
  // the identity in that order and the ids ascend as the array does.
  insertBatch: {
    name: 'staging_seed',
    text: `WITH made AS (
        INSERT INTO pets (name, category_id, status)
        SELECT name, category_id, status
        FROM unnest($1::text[], $2::bigint[], $3::text[]) WITH ORDINALITY AS given (name, category_id, status, n)
        ORDER BY n
        RETURNING id
      )
      SELECT count(*) AS count, min(id) AS "firstId", max(id) AS "lastId" FROM made`,
  },
} satisfies Record<string, Statement>

export class PostgresStagingData implements StagingData {
  readonly #db: Database

  constructor(db: Database) {
    this.#db = db
  }

  reset(): Promise<ResetCounts> {
    return this.#inStagingTransaction(async (query) => {
      await query(STAGING_SQL.lockForReset, [])
      const { rows } = await query<{ pets: number; records: number }>(STAGING_SQL.count, [])
      await query(STAGING_SQL.truncate, [])
      return { pets: rows[0]?.pets ?? 0, idempotencyRecords: rows[0]?.records ?? 0 }
    })
  }

  seed(pets: readonly NewPet[]): Promise<SeededPets> {
    return this.#inStagingTransaction(async (query) => {
      await query(STAGING_SQL.lockForSeed, [])
      let firstId: number | undefined
      let lastId: number | undefined
      for (let start = 0; start < pets.length; start += SEED_BATCH) {
        const batch = pets.slice(start, start + SEED_BATCH)
        const { rows } = await query<{ count: number; firstId: number; lastId: number }>(
          STAGING_SQL.insertBatch,
          [
            batch.map((pet) => pet.name),
            batch.map((pet) => pet.categoryId),
            batch.map((pet) => pet.status ?? null),
          ],
        )
        const made = rows[0]
        if (made?.count !== batch.length) throw new Error('a seed batch did not insert every pet')
        firstId ??= made.firstId
        lastId = made.lastId
      }
      return { count: pets.length, firstId, lastId }
    })
  }

  async #inStagingTransaction<T>(work: (query: TransactionQuery) => Promise<T>): Promise<T> {
    try {
      return await this.#db.transaction(async (query) => {
        const recorded = await readEnvironment(query)
        if (recorded !== 'staging') throw new NotStagingDatabaseError(recorded)
        return work(query)
      })
    } catch (err) {
      const code = (err as { code?: unknown } | null)?.code
      if (code !== INSUFFICIENT_PRIVILEGE) throw err
      throw new StagingDataError(
        `the PostgreSQL role cannot do it (${(err as Error).message}): emptying the tables and restarting the pets' ids needs the role that owns them, the one that runs "petstore migrate"; nothing was changed`,
        { cause: err },
      )
    }
  }
}
