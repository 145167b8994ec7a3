// D29 on SQLite: a staging database emptied and seeded (../staging.ts). Each is one
// transaction under the write lock, taken with BEGIN IMMEDIATE and waited for on timers like
// every write (D16); once it is held every step is synchronous, so nothing else of this
// process (the group commit included) runs between BEGIN and COMMIT.
import type { DatabaseSync } from 'node:sqlite'
import type { DeploymentEnv } from '../../contract/api-key.ts'
import type { NewPet } from '../../contract/schemas.ts'
import {
  environmentOf,
  NotStagingDatabaseError,
  type ResetCounts,
  type SeededPets,
  type StagingData,
} from '../staging.ts'
import type { Attempts } from './attempts.ts'
import { PET_WRITES } from './pets.ts'

export class SqliteStagingData implements StagingData {
  readonly #db: DatabaseSync
  readonly #attempts: Attempts

  constructor(db: DatabaseSync, attempts: Attempts) {
    this.#db = db
    this.#attempts = attempts
  }

  async environment(): Promise<DeploymentEnv | undefined> {
    return this.#attempts.read(() => readEnvironment(this.#db))
  }

  reset(): Promise<ResetCounts> {
    const db = this.#db
    return this.#attempts.write(() =>
      this.#inStagingTransaction(() => {
        const pets = Number(db.prepare('DELETE FROM pets').run().changes)
        const idempotencyRecords = Number(db.prepare('DELETE FROM idempotency_keys').run().changes)
        // AUTOINCREMENT keeps the highest id it handed out in sqlite_sequence, even once the
        // rows are gone; without that row the next id is 1.
        db.prepare("DELETE FROM sqlite_sequence WHERE name = 'pets'").run()
        return { pets, idempotencyRecords }
      }),
    )
  }

  async seed(pets: readonly NewPet[]): Promise<SeededPets> {
    const db = this.#db
    return this.#attempts.write(() =>
      this.#inStagingTransaction(() => {
        // The write lock is held: no other process inserts meanwhile, so the ids follow the
        // array's order, one after another.
        const insert = db.prepare(PET_WRITES.insert)
        let firstId: number | undefined
        let lastId: number | undefined
        for (const pet of pets) {
          const { lastInsertRowid } = insert.run(pet.name, pet.categoryId, pet.status ?? null)
          lastId = Number(lastInsertRowid)
          firstId ??= lastId
        }
        return { count: pets.length, firstId, lastId }
      }),
    )
  }

  /** `work` in one transaction, once the database is seen to be staging's inside it. */
  #inStagingTransaction<T>(work: () => T): T {
    const db = this.#db
    // Busy: thrown before anything is written, and tried again by Attempts.write.
    db.exec('BEGIN IMMEDIATE')
    try {
      const recorded = readEnvironment(db)
      if (recorded !== 'staging') throw new NotStagingDatabaseError(recorded)
      const result = work()
      db.exec('COMMIT')
      return result
    } catch (err) {
      if (db.isTransaction) db.exec('ROLLBACK')
      throw err
    }
  }
}

/** Migration 5's record; undefined where there is none, or no table for it yet. */
function readEnvironment(db: DatabaseSync): DeploymentEnv | undefined {
  const table = db
    .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'database_environment'")
    .get()
  if (table === undefined) return undefined
  const row = db.prepare('SELECT environment FROM database_environment WHERE id = 1').get()
  return environmentOf(row?.environment)
}

/** The migration adapter's step (store.ts): a new database says who made it. */
export function recordEnvironment(db: DatabaseSync, environment: DeploymentEnv): void {
  db.prepare(
    'INSERT INTO database_environment (id, environment, recorded_at) VALUES (1, ?, ?)',
  ).run(environment, new Date().toISOString())
}
