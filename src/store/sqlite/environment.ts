// D29 on SQLite: migration 5's record of the database's environment (../environment.ts).
import type { DatabaseSync } from 'node:sqlite'
import type { DeploymentEnv } from '../../contract/api-key.ts'
import { type DatabaseEnvironment, environmentOf, tableMissing } from '../environment.ts'
import type { Attempts } from './attempts.ts'

export class SqliteDatabaseEnvironment implements DatabaseEnvironment {
  readonly #db: DatabaseSync
  readonly #attempts: Attempts

  constructor(db: DatabaseSync, attempts: Attempts) {
    this.#db = db
    this.#attempts = attempts
  }

  async read(): Promise<DeploymentEnv | undefined> {
    return this.#attempts.read(() => readEnvironment(this.#db))
  }

  record(environment: DeploymentEnv): Promise<DeploymentEnv | undefined> {
    const db = this.#db
    return this.#attempts.write(() => {
      // Busy: thrown before anything is written, and tried again by Attempts.write.
      db.exec('BEGIN IMMEDIATE')
      try {
        if (!hasEnvironmentTable(db)) throw tableMissing()
        const before = readEnvironment(db)
        db.prepare(
          `INSERT INTO database_environment (id, environment, recorded_at) VALUES (1, ?, ?)
             ON CONFLICT (id) DO UPDATE SET environment = excluded.environment, recorded_at = excluded.recorded_at`,
        ).run(environment, new Date().toISOString())
        db.exec('COMMIT')
        return before
      } catch (err) {
        if (db.isTransaction) db.exec('ROLLBACK')
        throw err
      }
    })
  }
}

function hasEnvironmentTable(db: DatabaseSync): boolean {
  const table = db
    .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'database_environment'")
    .get()
  return table !== undefined
}

/** Migration 5's record; undefined where there is none, or no table for it yet. */
export function readEnvironment(db: DatabaseSync): DeploymentEnv | undefined {
  if (!hasEnvironmentTable(db)) return undefined
  const row = db.prepare('SELECT environment FROM database_environment WHERE id = 1').get()
  return environmentOf(row?.environment)
}

/** The migration adapter's step (store.ts): a new database says who made it. */
export function recordNewEnvironment(db: DatabaseSync, environment: DeploymentEnv): void {
  db.prepare(
    'INSERT INTO database_environment (id, environment, recorded_at) VALUES (1, ?, ?)',
  ).run(environment, new Date().toISOString())
}
