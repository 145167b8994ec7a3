// D27: what a process does with the database's schema before it serves or runs a command.
// PETSTORE_MIGRATE=auto applies what is pending; `off` leaves that to `petstore migrate` (a
// Kubernetes Job, a pipeline's step) and refuses a database that lacks a migration this release
// needs. Either way a database a newer release has contracted is refused, and one it has only
// expanded is served, said once. A new database records the process's PETSTORE_ENV as the one
// that made it, and production refuses a database staging made (D29, store/environment.ts).
import type { Config } from '../config.ts'
import type { DeploymentEnv } from '../contract/api-key.ts'
import { DatabaseEnvironmentError, recordCommand, refusesDatabase } from '../store/environment.ts'
import {
  type AppliedMigration,
  blockingMigrations,
  describeMigration,
  type LedgerEntry,
  MigrationsPendingError,
  SchemaTooNewError,
} from '../store/migrations.ts'
import type { Store } from '../store/store.ts'

/** A line for the process's log: the caller logs it at `level` once its logger exists. */
export interface SchemaNotice {
  level: 'info' | 'warn'
  fields: Record<string, unknown>
  message: string
}

/**
 * Migrates or checks, as PETSTORE_MIGRATE says; throws where this release must not go on, or
 * this process's environment must not use the database (D29: production on staging's).
 */
export async function prepareSchema(
  store: Store,
  config: Pick<Config, 'migrate' | 'env'>,
): Promise<SchemaNotice[]> {
  if (config.migrate === 'auto') {
    const run = await store.migrate(config.env)
    return [
      ...run.applied.map(appliedNotice),
      ...newerNotice(run.newer),
      ...unrecordedNotice(run.environment, config.env),
    ]
  }
  const state = await store.schema()
  if (state.environment !== undefined && refusesDatabase(config.env, state.environment)) {
    throw new DatabaseEnvironmentError(config.env, state.environment)
  }
  const blocking = blockingMigrations(state)
  if (blocking.length > 0) throw new SchemaTooNewError(state, blocking)
  if (state.pending.length > 0) throw new MigrationsPendingError(state)
  return [...newerNotice(state.newer), ...unrecordedNotice(state.environment, config.env)]
}

/**
 * D29: a database made before migration 5 has no record of who made it. It is served (it was,
 * before the record existed), and said once per start, with how to record it.
 */
export function unrecordedNotice(
  recorded: DeploymentEnv | undefined,
  environment: DeploymentEnv,
): SchemaNotice[] {
  if (recorded !== undefined) return []
  return [
    {
      level: 'warn',
      fields: { databaseEnvironment: null },
      message: `the database has no record of the environment that made it (it was made before migration 5): it is served, and "staging reset" and "staging seed" refuse it; record it as this process's with "${recordCommand(environment)}" (docs/operations.md, "Which environment a database belongs to")`,
    },
  ]
}

/** One line per migration applied: its version, name and how long it took. */
export function appliedNotice(migration: AppliedMigration): SchemaNotice {
  return {
    level: 'info',
    fields: { migration },
    message: `applied migration ${describeMigration(migration)} in ${migration.durationMs} ms`,
  }
}

/** One line for a newer release's migrations this release serves under; none when none. */
export function newerNotice(newer: readonly LedgerEntry[]): SchemaNotice[] {
  if (newer.length === 0) return []
  const named = newer.map(describeMigration).join(', ')
  return [
    {
      level: 'info',
      fields: { newerMigrations: newer.map(({ version, name }) => ({ version, name })) },
      message: `the database has ${newer.length === 1 ? 'a migration' : 'migrations'} of a newer release this release does not know: ${named}; ${newer.length === 1 ? 'it says' : 'each says'} releases before it may keep serving (an expand step), so this release serves`,
    },
  ]
}
