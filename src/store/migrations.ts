// D27: the schema's versions, shared by both SQL engines (sqlite/migrations.ts,
// postgres/migrations.ts list their own): the runner over a small per-engine adapter, the ledger
// of applied migrations (schema_migrations) with what each says of the releases before it, and
// what a release decides from it: migrate, serve beside a newer release's expand steps, or
// refuse a database a newer release has contracted. And the environment of the process that made
// the database, recorded once, when its first migrations run (migration 5, environment.ts), and
// read in the same transaction, so that production never migrates a database staging made.
import type { DeploymentEnv } from '../contract/api-key.ts'
import { printable } from '../printable.ts'
import { DatabaseEnvironmentError, refusesDatabase } from './environment.ts'

/** One step of an engine's schema (sqlite/migrations.ts, postgres/migrations.ts). */
export interface Migration {
  version: number
  name: string
  /**
   * D27: whether a release that predates this migration may keep serving the database once it
   * is applied: true for an expand step (a new table, a nullable column the older code never
   * reads), false for a contract step (a changed meaning, a dropped or renamed column). Recorded
   * in the ledger, where a release that does not know this migration reads it.
   */
  olderReleasesMayServe: boolean
  sql: string
}

/** One row of the ledger (schema_migrations): a migration some release applied. */
export interface LedgerEntry {
  version: number
  name: string
  /** As the migration said when it was applied; true for rows written before the ledger said. */
  olderReleasesMayServe: boolean
}

/** The database's schema against this release's migrations. */
export interface SchemaState {
  /** Every migration applied, in version order. */
  applied: LedgerEntry[]
  /** This release's migrations not applied yet, in order. */
  pending: Migration[]
  /** Migrations applied by a newer release, which this one does not know. */
  newer: LedgerEntry[]
  /** The versions this release knows, in order. */
  known: number[]
  /** Who made the database (environment.ts); undefined: made before migration 5, or new. */
  environment: DeploymentEnv | undefined
}

export function schemaState(
  ledger: readonly LedgerEntry[],
  migrations: readonly Migration[],
  environment: DeploymentEnv | undefined,
): SchemaState {
  const applied = [...ledger].sort((a, b) => a.version - b.version)
  const appliedVersions = new Set(applied.map((entry) => entry.version))
  const known = migrations.map((migration) => migration.version)
  const knownVersions = new Set(known)
  return {
    applied,
    pending: migrations.filter((migration) => !appliedVersions.has(migration.version)),
    newer: applied.filter((entry) => !knownVersions.has(entry.version)),
    known,
    environment,
  }
}

/**
 * D27: the database holds a migration of a newer release that releases before it must not serve
 * (a contract step). Nothing was changed; the message is the one line an operator reads.
 */
export class SchemaTooNewError extends Error {
  override name = 'SchemaTooNewError'

  constructor(state: SchemaState, blocking: readonly LedgerEntry[]) {
    const named = blocking.map(describeMigration).join(', ')
    super(
      `the database has ${plural(blocking.length, 'migration')} of a newer release that releases before it must not serve: ${named}. ` +
        `The database is at ${versions(state.applied.map((entry) => entry.version))}; this release knows ${versions(state.known)}. ` +
        'Upgrade this instance to the release that applied it, or restore the database from a backup taken before it.',
    )
  }
}

/** D27: with PETSTORE_MIGRATE=off, a database that lacks migrations this release needs. */
export class MigrationsPendingError extends Error {
  override name = 'MigrationsPendingError'

  constructor(state: SchemaState) {
    super(
      `the database lacks ${plural(state.pending.length, 'migration')} this release needs: ${state.pending.map(describeMigration).join(', ')}. ` +
        'Run "petstore migrate" first (PETSTORE_MIGRATE=off: this process does not migrate).',
    )
  }
}

/** A newer release's migrations that stop this release from serving; empty when none does. */
export function blockingMigrations(state: SchemaState): LedgerEntry[] {
  return state.newer.filter((entry) => !entry.olderReleasesMayServe)
}

/**
 * "4 (migration ledger)". A name read from the ledger may hold anything a role that can write it
 * put there: it is printed escaped (printable.ts), so that it cannot forge lines.
 */
export function describeMigration(migration: { version: number; name: string }): string {
  return `${migration.version} (${printable(migration.name)})`
}

/** "versions 1, 2, 3", "version 1", "no version" */
function versions(list: readonly number[]): string {
  if (list.length === 0) return 'no version'
  if (list.length === 1) return `version ${list[0]}`
  return `versions ${list.join(', ')}`
}

function plural(count: number, noun: string): string {
  return count === 1 ? `a ${noun}` : `${count} ${noun}s`
}

/** One migration this run applied, and how long it took (D27: one log line each). */
export interface AppliedMigration {
  version: number
  name: string
  durationMs: number
}

/** What a run of the migrations did and found. */
export interface MigrationRun {
  applied: AppliedMigration[]
  /** A newer release's migrations, each one this release may serve under (else it throws). */
  newer: LedgerEntry[]
  /** Who made the database, as recorded once the run committed; undefined: made before 5. */
  environment: DeploymentEnv | undefined
}

/**
 * One engine's side of applying migrations: a transaction that also makes processes starting
 * together take turns (SQLite's write lock, PostgreSQL's advisory lock), so that each migration
 * is applied once; the ledger of applied migrations (schema_migrations); one migration's run.
 */
export interface MigrationAdapter {
  begin(): Promise<void>
  /** The migrations applied already; the ledger is made first where there is none. */
  ledger(): Promise<LedgerEntry[]>
  /** Migration 5's record (environment.ts); undefined where there is none, or no table yet. */
  environment(): Promise<DeploymentEnv | undefined>
  /** Runs the migration's SQL and records it in the ledger. */
  apply(migration: Migration): Promise<void>
  /**
   * Records who made the database (migration 5's one-row table): called once, in the transaction
   * that made it, after every migration has been applied.
   */
  recordEnvironment(environment: DeploymentEnv): Promise<void>
  commit(): Promise<void>
  /** After a failure; never throws, so that the failure is what is reported. */
  rollback(): Promise<void>
}

/**
 * Applies the migrations not applied yet, in order, in one transaction: all of them or, on a
 * failure, none. Refuses, changing nothing, a database a newer release has taken past what this
 * one may serve (D27), and one recorded as made by an environment this process must not use
 * (environment.ts: production on staging's). On a new database (an empty ledger) it also records
 * `environment`, the migrating process's PETSTORE_ENV, in the same transaction: the staging
 * commands change only a database a staging process made. A database made before migration 5
 * gets no record (its ledger was not empty): who made it is unknown, and they refuse it.
 */
export async function runMigrations(
  adapter: MigrationAdapter,
  migrations: readonly Migration[],
  environment: DeploymentEnv,
  now: () => number = () => performance.now(),
): Promise<MigrationRun> {
  try {
    await adapter.begin()
    const state = schemaState(await adapter.ledger(), migrations, await adapter.environment())
    if (state.environment !== undefined && refusesDatabase(environment, state.environment)) {
      throw new DatabaseEnvironmentError(environment, state.environment)
    }
    const blocking = blockingMigrations(state)
    if (blocking.length > 0) throw new SchemaTooNewError(state, blocking)
    const applied: AppliedMigration[] = []
    for (const migration of state.pending) {
      const started = now()
      await adapter.apply(migration)
      const durationMs = Math.round(now() - started)
      applied.push({ version: migration.version, name: migration.name, durationMs })
    }
    const isNew = state.applied.length === 0
    if (isNew) await adapter.recordEnvironment(environment)
    await adapter.commit()
    return { applied, newer: state.newer, environment: isNew ? environment : state.environment }
  } catch (err) {
    await adapter.rollback()
    throw err
  }
}
