// How SQLite fails, and what the store does about it (D16).
//
// A lock held by another process (the CLI, another instance, `sqlite3` in a shell): SQLite's busy
// handler waits by sleeping on the calling thread, which here is the event loop. With a 5 s busy
// timeout one create froze the whole process for 5 s (/healthz took 4.95 s, so a liveness probe
// would restart a healthy instance). So each try waits at most BUSY_TIMEOUT_MS, and a try that
// finds the database still locked is repeated on a timer, with a growing pause, until the
// caller's deadline; between tries the event loop serves everything else.
//
// A disk that is full, read-only or failing: no retry here helps, but one later may (once an
// operator frees space), so it is a StoreUnavailableError (503 with Retry-After) that says what
// happened, not a 500.
import { setTimeout as sleep } from 'node:timers/promises'
import { StoreUnavailableError } from '../store.ts'

/** The longest one try blocks the event loop waiting for a lock. */
export const BUSY_TIMEOUT_MS = 5
/** How long a write waits for another process's lock, by default, before a 503. */
export const LOCK_TIMEOUT_MS = 5_000

const FIRST_PAUSE_MS = 5
const LONGEST_PAUSE_MS = 100

/** The pauses between tries: 5, 10, 20, … ms, then 100 ms each. */
export class Backoff {
  #next = FIRST_PAUSE_MS

  next(): number {
    const pause = this.#next
    this.#next = Math.min(pause * 2, LONGEST_PAUSE_MS)
    return pause
  }
}

// SQLite's primary result codes (the low byte of an extended code).
const SQLITE_BUSY = 5
const SQLITE_READONLY = 8
const SQLITE_IOERR = 10
const SQLITE_FULL = 13
const SQLITE_CANTOPEN = 14

/** What a client is told for a storage failure: an operator must act, so not every second. */
const STORAGE_RETRY_AFTER_SECONDS = 10

const STORAGE_FAILURES = new Map([
  [SQLITE_FULL, "the database's disk is full"],
  [SQLITE_READONLY, 'the database file is read-only'],
  [SQLITE_IOERR, 'the database had an I/O error'],
  [SQLITE_CANTOPEN, 'the database file cannot be opened for writing'],
])

function primaryCode(err: unknown): number | undefined {
  const code = (err as { errcode?: unknown } | null)?.errcode
  return typeof code === 'number' ? code & 0xff : undefined
}

export function isBusy(err: unknown): boolean {
  return primaryCode(err) === SQLITE_BUSY
}

/** Another process held the write lock past the deadline. */
export function lockedError(cause: unknown): StoreUnavailableError {
  return new StoreUnavailableError('the SQLite database stayed locked past the deadline', {
    cause,
    reason: 'the database is locked by another process',
  })
}

/** The one place SQLite errors are sorted: what a retry may outlive becomes a 503; the rest stays. */
export function sortSqliteError(err: unknown): unknown {
  if (err instanceof StoreUnavailableError) return err
  if (isBusy(err)) return lockedError(err)
  const code = primaryCode(err)
  const reason = code === undefined ? undefined : STORAGE_FAILURES.get(code)
  if (reason === undefined) return err
  return new StoreUnavailableError(reason, {
    cause: err,
    reason,
    retryAfterSeconds: STORAGE_RETRY_AFTER_SECONDS,
  })
}

/**
 * Runs `attempt` (one statement or one whole transaction, never left open between tries) until
 * it does not find the database locked, pausing on timers between tries; past `timeoutMs`, a
 * 503. Errors come out sorted (sortSqliteError).
 */
export async function retryWhileBusy<T>(
  attempt: () => T | Promise<T>,
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let backoff: Backoff | undefined
  for (;;) {
    try {
      return await attempt()
    } catch (err) {
      const left = deadline - Date.now()
      if (!isBusy(err) || left <= 0) throw sortSqliteError(err)
      backoff ??= new Backoff()
      await sleep(Math.min(backoff.next(), left))
    }
  }
}
