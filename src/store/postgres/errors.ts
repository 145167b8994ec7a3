// How the driver's and the server's errors become the store's (D16, D19): unreachable, and a
// database that cannot store, become StoreUnavailableError (503); the rest stays as it is.
import { StoreUnavailableError } from '../store.ts'

// Errors raised by the driver itself (no SQLSTATE) when the connection is lost or times out.
const DRIVER_CONNECTION_MESSAGES = new Set([
  'timeout expired',
  'timeout exceeded when trying to connect',
  'Connection terminated',
  'Connection terminated unexpectedly',
  'Connection terminated due to connection timeout',
  'Query read timeout',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'Cannot use a pool after calling end on the pool',
])

// Node's socket errors that mean the server cannot be reached (now).
const SOCKET_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
])

// Server errors a retry can outlive: 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot
// connect now (starting up), 57014 statement timeout, 53300 too many connections. And the
// refusals of a new connection (3D000 no such database, 28000 no such role or no pg_hba.conf
// line, 28P01 wrong password): at start they end it with one line (refusals.ts); once
// running, a database dropped or a role changed under the service is an outage, 503, until fixed.
const RETRYABLE_SQLSTATES = new Set([
  '57P01',
  '57P02',
  '57P03',
  '57014',
  '53300',
  '3D000',
  '28000',
  '28P01',
])

function isConnectionFailure(err: unknown): boolean {
  if (!(err instanceof Error)) return false
  const code = (err as { code?: unknown }).code
  if (typeof code === 'string') {
    // SQLSTATE class 08: connection exception.
    if (SOCKET_ERROR_CODES.has(code) || RETRYABLE_SQLSTATES.has(code) || code.startsWith('08'))
      return true
  }
  return DRIVER_CONNECTION_MESSAGES.has(err.message)
}

/** What a client is told for a storage failure: an operator must act, so not every second. */
const STORAGE_RETRY_AFTER_SECONDS = 10

// Server errors that say the database cannot store what it is given (D16), as SQLite's full,
// read-only or failing disk: 53100 disk_full, 58030 io_error, 53200 out_of_memory,
// 25006 read_only_sql_transaction (a standby, or default_transaction_read_only).
const STORAGE_FAILURES = new Map([
  ['53100', "the database's disk is full"],
  ['58030', 'the database had an I/O error'],
  ['53200', 'the database server is out of memory'],
  ['25006', 'the database is read-only'],
])

function storageFailure(err: unknown): StoreUnavailableError | undefined {
  const code = (err as { code?: unknown } | null)?.code
  const reason = typeof code === 'string' ? STORAGE_FAILURES.get(code) : undefined
  if (reason === undefined) return undefined
  return new StoreUnavailableError(reason, {
    cause: err,
    reason,
    retryAfterSeconds: STORAGE_RETRY_AFTER_SECONDS,
  })
}

/**
 * The one place driver errors are sorted: unreachable, and a database that cannot store, become
 * retryable (503); the rest stays.
 */
export function sortPostgresError(err: unknown): unknown {
  const storage = storageFailure(err)
  if (storage !== undefined) return storage
  if (!isConnectionFailure(err)) return err
  // D19: PgBouncer's answer to the statement_timeout a direct connection sends at start.
  if (err instanceof Error && err.message.startsWith('unsupported startup parameter')) {
    return new StoreUnavailableError(
      'the PostgreSQL pooler refuses the connection; behind a transaction-mode pooler such as PgBouncer, set DATABASE_POOLER=transaction',
      { cause: err },
    )
  }
  return new StoreUnavailableError('the PostgreSQL database is unreachable', { cause: err })
}
