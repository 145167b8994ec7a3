// D29 on SQLite: a staging database emptied and seeded (../staging.ts). Each is one
// transaction under the write lock, taken with BEGIN IMMEDIATE and waited for on timers like
// every write (D16); once it is held every step is synchronous, so nothing else of this
// process (the group commit included) runs between BEGIN and COMMIT.
import type { DatabaseSync } from 'node:sqlite'
import type { NewPet } from '../../contract/schemas.ts'
import {
  NotStagingDatabaseError,
  type ResetCounts,
  type SeededPets,
  type StagingData,
} from '../staging.ts'
import type { Attempts } from './attempts.ts'
import { readEnvironment } from './environment.ts'
import { PET_WRITES } from './pets.ts'

export class SqliteStagingData implements StagingData {
  readonly #db: DatabaseSync
  readonly #attempts: Attempts

  constructor(db: DatabaseSync, attempts: Attempts) {
    this.#db = db
    this.#attempts = attempts
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
