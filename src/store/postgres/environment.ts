// D29 on PostgreSQL: migration 5's record of the database's environment (../environment.ts).
import type { Client } from 'pg'
import type { DeploymentEnv } from '../../contract/api-key.ts'
import {
  type DatabaseEnvironment,
  EnvironmentRecordError,
  environmentOf,
  tableMissing,
} from '../environment.ts'
import type { Database, Statement, TransactionQuery } from './connection.ts'

/** SQLSTATE insufficient_privilege. */
export const INSUFFICIENT_PRIVILEGE = '42501'

const ENVIRONMENT_SQL = {
  hasTable: {
    name: 'environment_has_table',
    text: "SELECT to_regclass('database_environment') IS NOT NULL AS present",
  },
  read: {
    name: 'environment_read',
    text: 'SELECT environment FROM database_environment WHERE id = 1',
  },
  // Waits for another record under way, so that what it said before is what this one replaces.
  lock: {
    name: 'environment_lock',
    text: 'LOCK TABLE database_environment IN SHARE ROW EXCLUSIVE MODE',
  },
  record: {
    name: 'environment_record',
    text: `INSERT INTO database_environment (id, environment, recorded_at) VALUES (1, $1, now())
      ON CONFLICT (id) DO UPDATE SET environment = excluded.environment, recorded_at = excluded.recorded_at`,
  },
  recordNew: {
    name: 'environment_record_new',
    text: 'INSERT INTO database_environment (id, environment, recorded_at) VALUES (1, $1, now())',
  },
} satisfies Record<string, Statement>

export class PostgresDatabaseEnvironment implements DatabaseEnvironment {
  readonly #db: Database

  constructor(db: Database) {
    this.#db = db
  }

  read(): Promise<DeploymentEnv | undefined> {
    return readEnvironment((statement, values) => this.#db.query(statement, values))
  }

  async record(environment: DeploymentEnv): Promise<DeploymentEnv | undefined> {
    try {
      return await this.#db.transaction(async (query) => {
        const { rows } = await query<{ present: boolean }>(ENVIRONMENT_SQL.hasTable, [])
        if (rows[0]?.present !== true) throw tableMissing()
        await query(ENVIRONMENT_SQL.lock, [])
        const before = await readEnvironment(query)
        await query(ENVIRONMENT_SQL.record, [environment])
        return before
      })
    } catch (err) {
      const code = (err as { code?: unknown } | null)?.code
      if (code !== INSUFFICIENT_PRIVILEGE) throw err
      throw new EnvironmentRecordError(
        `the PostgreSQL role may not write the environment record (${(err as Error).message}): run it as the role that owns the tables, the one that runs "petstore migrate"; nothing was changed`,
        { cause: err },
      )
    }
  }
}

/** Migration 5's record; undefined where there is none, or no table for it yet. */
export async function readEnvironment(query: TransactionQuery): Promise<DeploymentEnv | undefined> {
  const { rows: table } = await query<{ present: boolean }>(ENVIRONMENT_SQL.hasTable, [])
  if (table[0]?.present !== true) return undefined
  const { rows } = await query<{ environment: string }>(ENVIRONMENT_SQL.read, [])
  return environmentOf(rows[0]?.environment)
}

/** The same on the migrations' own connection (store.ts), as unnamed statements. */
export function readEnvironmentOn(client: Client): Promise<DeploymentEnv | undefined> {
  return readEnvironment(async (statement, values) => {
    const result = await client.query(statement.text, values)
    return { rows: result.rows, rowCount: result.rowCount ?? 0 }
  })
}

/** The migration adapter's step (store.ts): a new database says who made it. */
export async function recordNewEnvironment(
  client: Client,
  environment: DeploymentEnv,
): Promise<void> {
  await client.query(ENVIRONMENT_SQL.recordNew.text, [environment])
}
