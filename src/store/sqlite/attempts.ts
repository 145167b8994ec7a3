// How every SQLite statement runs (D16): a lock another process holds is waited for in short
// tries on timers, never by blocking the event loop; failures are sorted (failures.ts) and
// reported once (outages.ts).
import type { DatabaseSync, StatementSync } from 'node:sqlite'
import { StoreOutages } from '../outages.ts'
import { StoreUnavailableError } from '../store.ts'
import { isBusy, retryWhileBusy, sortSqliteError } from './failures.ts'

/**
 * What every statement goes through, shared by the store and its repositories: the lock is
 * waited for on timers, failures are sorted and reported once (outages.ts), and the last failure
 * is kept while writes fail, for readiness.
 */
export class Attempts {
  readonly lockTimeoutMs: number
  readonly outages = new StoreOutages()
  /** Set while writes fail (the last failure); cleared by the next write that commits. */
  failing: StoreUnavailableError | undefined

  constructor(lockTimeoutMs: number) {
    this.lockTimeoutMs = lockTimeoutMs
  }

  /** Runs one write (a statement or a whole transaction) with retries while locked. */
  async write<T>(attempt: () => T, timeoutMs = this.lockTimeoutMs): Promise<T> {
    let result: T
    try {
      result = await retryWhileBusy(attempt, timeoutMs)
    } catch (err) {
      throw this.failed(err)
    }
    this.committed()
    return result
  }

  /**
   * Reads need no lock in WAL mode; a rare wait (WAL recovery) is retried the same way. The
   * first try is a plain call: reads are the hot path.
   */
  read<T>(attempt: () => T): T | Promise<T> {
    try {
      return attempt()
    } catch (err) {
      if (isBusy(err)) return this.#readLater(attempt)
      // A failed read is reported too (never silent); only a commit ends an outage.
      throw this.failed(err)
    }
  }

  async #readLater<T>(attempt: () => T): Promise<T> {
    try {
      return await retryWhileBusy(attempt, this.lockTimeoutMs)
    } catch (err) {
      throw this.failed(err)
    }
  }

  /** Sorts `err`; a 503 is reported for `count` operations and kept for readiness. */
  failed(err: unknown, count = 1): unknown {
    const sorted = sortSqliteError(err)
    if (sorted instanceof StoreUnavailableError) {
      this.failing = sorted
      this.outages.failed(sorted, count)
    }
    return sorted
  }

  committed(): void {
    this.failing = undefined
    this.outages.succeeded()
  }
}

/**
 * A statement prepared when it first runs, not when its repository is made: a store is whole
 * when opened, before migrate() has made the tables its statements name. `arrays`: rows come
 * as arrays (pets.ts says why).
 */
export function preparedOnFirstUse(
  db: DatabaseSync,
  sql: string,
  arrays = false,
): () => StatementSync {
  let statement: StatementSync | undefined
  return () => {
    if (statement === undefined) {
      statement = db.prepare(sql)
      if (arrays) statement.setReturnArrays(true)
    }
    return statement
  }
}
