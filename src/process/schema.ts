// D27: what a process does with the database's schema before it serves or runs a command.
// PETSTORE_MIGRATE=auto applies what is pending; `off` leaves that to `petstore migrate` (a
// Kubernetes Job, a pipeline's step) and refuses a database that lacks a migration this release
// needs. Either way a database a newer release has contracted is refused, and one it has only
// expanded is served, said once. A new database records the process's PETSTORE_ENV as the one
// that made it (the staging commands, D29).
import type { Config } from '../config.ts'
import {
  type AppliedMigration,
  blockingMigrations,
  describeMigration,
  type LedgerEntry,
  MigrationsPendingError,
  SchemaTooNewError,
} from '../store/migrations.ts'
import type { Store } from '../store/store.ts'

/** A line for the process's log: the caller logs it at info once its logger exists. */
export interface SchemaNotice {
  fields: Record<string, unknown>
  message: string
}

/** Migrates or checks, as PETSTORE_MIGRATE says; throws where this release must not go on. */
export async function prepareSchema(
  store: Store,
  config: Pick<Config, 'migrate' | 'env'>,
): Promise<SchemaNotice[]> {
  if (config.migrate === 'auto') {
    const run = await store.migrate(config.env)
    return [...run.applied.map(appliedNotice), ...newerNotice(run.newer)]
  }
  const state = await store.schema()
  const blocking = blockingMigrations(state)
  if (blocking.length > 0) throw new SchemaTooNewError(state, blocking)
  if (state.pending.length > 0) throw new MigrationsPendingError(state)
  return newerNotice(state.newer)
}

/** One line per migration applied: its version, name and how long it took. */
export function appliedNotice(migration: AppliedMigration): SchemaNotice {
  return {
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
      fields: { newerMigrations: newer.map(({ version, name }) => ({ version, name })) },
      message: `the database has ${newer.length === 1 ? 'a migration' : 'migrations'} of a newer release this release does not know: ${named}; ${newer.length === 1 ? 'it says' : 'each says'} releases before it may keep serving (an expand step), so this release serves`,
    },
  ]
}
