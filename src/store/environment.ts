// D29: which environment a database belongs to. The process whose migrations make a new database
// records its PETSTORE_ENV there (migration 5's one-row table, written by runMigrations in the
// same transaction), and every process reads it before it changes anything: the staging commands
// change only a database staging made, and production refuses one staging made (it may be
// emptied by `staging reset` at any time). `petstore environment record` is the one deliberate
// way to change the record.
import type { DeploymentEnv } from '../contract/api-key.ts'

/** Migration 5's record of the database's environment, per engine. */
export interface DatabaseEnvironment {
  /**
   * The PETSTORE_ENV of the process that made the database, or undefined: made before migration
   * 5 (or not made yet). Read only; works before migrate() too.
   */
  read(): Promise<DeploymentEnv | undefined>
  /**
   * Records `environment` as the database's, in place of what was recorded: what it said before
   * (undefined: nothing). Throws EnvironmentRecordError, changing nothing, before migration 5
   * has made the table, or where the role may not write it (PostgreSQL).
   */
  record(environment: DeploymentEnv): Promise<DeploymentEnv | undefined>
}

/** The recorded environment as stored, or undefined for anything else (no row). */
export function environmentOf(value: unknown): DeploymentEnv | undefined {
  return value === 'production' || value === 'staging' ? value : undefined
}

/**
 * Whether a process of `environment` must not serve, migrate or make keys on a database recorded
 * as `recorded`: production on staging's, which `staging reset` may empty. The other way round is
 * served (a staging copy of production's data is a common rehearsal; the staging commands refuse
 * it all the same).
 */
export function refusesDatabase(
  environment: DeploymentEnv,
  recorded: DeploymentEnv | undefined,
): boolean {
  return environment === 'production' && recorded === 'staging'
}

/** The command that records the database as `environment`'s (docs/operations.md). */
export function recordCommand(environment: DeploymentEnv): string {
  return `petstore environment record ${environment} --yes`
}

/**
 * A process of one environment on a database recorded as another's that it must not use
 * (refusesDatabase): nothing was changed. The message is the one line an operator reads, and
 * names both ways out.
 */
export class DatabaseEnvironmentError extends Error {
  override name = 'DatabaseEnvironmentError'
  readonly recorded: DeploymentEnv
  readonly environment: DeploymentEnv

  constructor(environment: DeploymentEnv, recorded: DeploymentEnv) {
    super(
      `the database was made by a ${recorded} instance (recorded at its first migration), and this process is ${environment} (PETSTORE_ENV): ${environment} does not serve, migrate or make keys on a ${recorded} database, which "staging reset" may empty at any time; nothing was changed. ` +
        `Point DATABASE_URL at ${environment}'s database (or a new one), or, if this database is ${environment}'s, record it so with "${recordCommand(environment)}" (docs/operations.md, "Which environment a database belongs to")`,
    )
    this.environment = environment
    this.recorded = recorded
  }
}

/**
 * `record()` could not be done for a reason the operator must fix (no table yet, a role that may
 * not write it); nothing was changed. The message is one line.
 */
export class EnvironmentRecordError extends Error {
  override name = 'EnvironmentRecordError'
}

/** `record()` before migration 5 has made the table. */
export function tableMissing(): EnvironmentRecordError {
  return new EnvironmentRecordError(
    'the database has no table for its environment yet (migration 5): run "petstore migrate" first; nothing was changed',
  )
}
