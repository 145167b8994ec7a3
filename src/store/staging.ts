// D29: a staging deployment's data, emptied and filled again (`petstore staging reset`,
// `petstore staging seed`). Only on a database a staging process made: who made it is recorded
// when its first migrations run (environment.ts), and each engine checks that record again inside
// the transaction that deletes or creates, so that no caller of the store, whatever it checked
// before, can empty a production database.
import type { DeploymentEnv } from '../contract/api-key.ts'
import type { NewPet } from '../contract/schemas.ts'

/** What `reset()` deleted. */
export interface ResetCounts {
  pets: number
  idempotencyRecords: number
}

/** What `seed()` created: `count` pets with the ids firstId to lastId, in the array's order. */
export interface SeededPets {
  count: number
  /** Undefined when no pet was given. */
  firstId?: number | undefined
  lastId?: number | undefined
}

export interface StagingData {
  /**
   * Deletes every pet and every Idempotency-Key record in one transaction, keeping the API keys;
   * the next pet's id is 1. Throws NotStagingDatabaseError, changing nothing, unless the
   * database was made by staging.
   */
  reset(): Promise<ResetCounts>
  /**
   * Creates `pets` in one transaction, in the array's order (ascending ids), after any already
   * there: all of them or, on a failure, none. Throws NotStagingDatabaseError, changing nothing,
   * unless the database was made by staging.
   */
  seed(pets: readonly NewPet[]): Promise<SeededPets>
}

/** Why a database is not one the staging commands may change; one clause, no full stop. */
export function notStagingReason(recorded: DeploymentEnv | undefined): string {
  return recorded === undefined
    ? "the database's environment is unknown: it was made before releases recorded it (migration 5), perhaps by production"
    : `the database was made by a ${recorded} instance (recorded at its first migration)`
}

/** The database was not made by a staging process: nothing was changed. */
export class NotStagingDatabaseError extends Error {
  override name = 'NotStagingDatabaseError'
  readonly recorded: DeploymentEnv | undefined

  constructor(recorded: DeploymentEnv | undefined) {
    super(`${notStagingReason(recorded)}; only a database made by staging may be reset or seeded`)
    this.recorded = recorded
  }
}

/**
 * The store could not do it for a reason the operator must fix (PostgreSQL: the role does not
 * own the tables); nothing was changed. The message is one line.
 */
export class StagingDataError extends Error {
  override name = 'StagingDataError'
}
