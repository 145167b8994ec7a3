// The connection to PostgreSQL: its settings (timeouts; D19's pooler), bigints as numbers, and
// the pool, through which every query goes and has its errors sorted (errors.ts).
import {
  type ClientConfig,
  type CustomTypesConfig,
  Pool,
  type PoolClient,
  type QueryResult,
  types,
} from 'pg'
import type { DatabasePooler } from '../../config.ts'
import { StoreOutages } from '../outages.ts'
import { type PoolStats, type StoreObserver, StoreUnavailableError, unobserved } from '../store.ts'
import { sortPostgresError } from './errors.ts'

/** How long to wait for a connection, new or from a busy pool. */
const CONNECT_TIMEOUT_MS = 2_000
/** The server cancels a statement that runs longer (SQLSTATE 57014). */
export const STATEMENT_TIMEOUT_MS = 5_000
// The client gives up on a reply this long after the statement timeout. It covers what the
// server-side timeout cannot: a server or network that has gone silent. Longer than the
// statement timeout, so that normally the server's own cancel ends a slow statement cleanly first.
export const QUERY_TIMEOUT_SLACK_MS = 1_000
/** Readiness answers quickly or not at all: probes have short timeouts of their own. */
export const PING_TIMEOUT_MS = 1_000

/** bigint columns arrive as text; within the contract's range (≤ 2^53 − 1) a number is exact. */
function safeInteger(text: string): number {
  const value = Number(text)
  if (!Number.isSafeInteger(value)) throw new RangeError(`integer ${text} is beyond 2^53 - 1`)
  return value
}

// The one place bigint (int8) becomes a number: ids, categoryIds and counts alike.
export const int8AsNumber: CustomTypesConfig = {
  getTypeParser: (id, format) =>
    id === types.builtins.INT8 ? safeInteger : types.getTypeParser(id, format),
}

/** How this store talks to the server (D19): fixed when it opens. */
export interface Session {
  pooler: DatabasePooler
  statementTimeoutMs: number
  /** The client's own limit on waiting for a reply (send(), below). */
  queryTimeoutMs: number
}

export function connectionConfig(url: string, session: Session): ClientConfig {
  return {
    connectionString: url,
    application_name: 'petstore',
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    // D19: on a direct connection the timeout is set once, for the session, at no cost per
    // statement. A transaction-mode pooler refuses startup parameters (and would not keep a
    // session's settings): there every request's statement, a single one, has the role's
    // setting (docs/operations.md, PgBouncer) and the client's own timeout. That one is the
    // store's (send(), below), not pg's query_timeout, which is left unset (D25).
    ...(session.pooler === 'none' ? { statement_timeout: session.statementTimeoutMs } : {}),
    // TCP keepalive finds connections a silent network has cut while they sit idle in the pool.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    types: int8AsNumber,
  }
}

export interface Statement {
  /**
   * On a direct connection the name makes pg prepare the statement once per connection, not
   * parse and plan it on every run (D19 has what that is worth). Behind a transaction-mode
   * pooler it is left out: a named
   * statement belongs to one server connection, which the pooler hands to other clients, so
   * each statement goes as the unnamed one (Parse, Bind, Execute in one round trip).
   */
  name: string
  text: string
}

/** A query inside Database.transaction(). */
export type TransactionQuery = <Row>(
  statement: Statement,
  values: unknown[],
) => Promise<{ rows: Row[]; rowCount: number }>

/** pg's callback of a query: an error, or none (null) and the result. */
type Answer = (err: Error | null | undefined, result?: QueryResult) => void

/**
 * Sends one statement on `client` and answers `done` once: with pg's result or error, or with
 * pg's own 'Query read timeout' (errors.ts: the database unreachable) when no reply has come
 * within `timeoutMs`. The timeout is ours, not pg's query_timeout, and pg gets the callback as
 * it makes the query, not through its promises: both of those set the query's callback after
 * the query is made, and under load that made V8 move nearly every query's objects (the query,
 * its reply's messages and rows) to the old generation, up to 30 MB a second (D25).
 */
function send(
  client: PoolClient,
  config: { name?: string; text: string; values: unknown[] },
  timeoutMs: number,
  done: Answer,
): void {
  let answered = false
  let timer: NodeJS.Timeout | undefined
  const answer: Answer = (err, result) => {
    if (answered) return
    answered = true
    clearTimeout(timer)
    done(err, result)
  }
  // pg answers later, never from within query(); what it throws (a malformed config) the
  // caller gets, with no timer left behind.
  client.query(config, answer)
  timer = setTimeout(timedOut, timeoutMs, answer)
}

function timedOut(answer: Answer): void {
  answer(new Error('Query read timeout'))
}

/**
 * The pool, with every query's errors sorted in one place, and a count of the queries still
 * running so that close() can let them finish (pg's pool.end() would strand queued ones). A
 * count, not a long-lived Set of their promises, which under load made V8 move the queries'
 * objects to the old generation as well (D25).
 */
export class Database {
  readonly #pool: Pool
  readonly session: Session
  #running = 0
  /** close()'s wait for the last running query, once it is closing. */
  #drained: (() => void) | undefined
  #closing = false
  /** D16: every query that finds the database away, and every answer once it is back. */
  readonly outages = new StoreOutages()
  /** D17: each create's commit. */
  observer: StoreObserver = unobserved

  constructor(pool: Pool, session: Session) {
    this.#pool = pool
    this.session = session
  }

  /** D19: named on a direct connection, unnamed behind a transaction-mode pooler. */
  #prepared(statement: Statement): { name?: string; text: string } {
    return this.session.pooler === 'none' ? statement : { text: statement.text }
  }

  async query<Row>(
    statement: Statement,
    values: unknown[],
    timeoutMs = this.session.queryTimeoutMs,
  ): Promise<{ rows: Row[]; rowCount: number }> {
    if (this.#closing) throw new StoreUnavailableError('the store is closed')
    const config = { ...this.#prepared(statement), values }
    this.#running++
    try {
      const result = await this.#pooled(config, timeoutMs)
      this.outages.succeeded()
      return { rows: result.rows as Row[], rowCount: result.rowCount ?? 0 }
    } catch (err) {
      const sorted = sortPostgresError(err)
      if (sorted instanceof StoreUnavailableError) this.outages.failed(sorted)
      throw sorted
    } finally {
      this.#finished()
    }
  }

  /**
   * What pg-pool's pool.query() does, with the store's timeout (send()): a connection from the
   * pool, the statement on it, the connection given back, or discarded if anything failed (a
   * connection whose reply timed out may still be busy); a connection lost meanwhile (its
   * 'error' event) answers the statement.
   */
  #pooled(
    config: { name?: string; text: string; values: unknown[] },
    timeoutMs: number,
  ): Promise<QueryResult> {
    return new Promise((resolve, reject) => {
      this.#pool.connect((err, client, release) => {
        if (err || client === undefined) {
          reject(err)
          return
        }
        let answered = false
        const answer: Answer = (err, result) => {
          if (answered) return // the connection lost ('error'), then pg's answer to the query
          answered = true
          client.removeListener('error', answer)
          release(err ?? undefined)
          if (err) reject(err)
          else resolve(result as QueryResult)
        }
        client.once('error', answer)
        try {
          send(client, config, timeoutMs, answer)
        } catch (err) {
          answer(err as Error)
        }
      })
    })
  }

  #finished(): void {
    this.#running--
    if (this.#running === 0) this.#drained?.()
  }

  /**
   * `work` in one transaction on one connection of the pool (which a transaction-mode pooler
   * keeps on one server connection), committed when it returns, rolled back when it throws.
   */
  async transaction<T>(work: (query: TransactionQuery) => Promise<T>): Promise<T> {
    if (this.#closing) throw new StoreUnavailableError('the store is closed')
    const timeoutMs = this.session.queryTimeoutMs
    let client: PoolClient | undefined
    this.#running++
    try {
      client = await this.#pool.connect()
      const connection = client
      const run = <Row>(statement: { name?: string; text: string }, values: unknown[]) =>
        new Promise<{ rows: Row[]; rowCount: number }>((resolve, reject) => {
          send(connection, { ...statement, values }, timeoutMs, (err, result) => {
            if (err || result === undefined) reject(err)
            else resolve({ rows: result.rows as Row[], rowCount: result.rowCount ?? 0 })
          })
        })
      // Named, whatever a role or database sets by default: work relies on each statement
      // seeing what others committed before it began (a serialising lock, then a read).
      await run({ text: 'BEGIN ISOLATION LEVEL READ COMMITTED' }, [])
      const result = await work((statement, values) => run(this.#prepared(statement), values))
      await run({ text: 'COMMIT' }, [])
      this.outages.succeeded()
      client.release()
      return result
    } catch (err) {
      // A connection whose transaction failed is not given back to others as it is.
      client?.release(true)
      const sorted = sortPostgresError(err)
      if (sorted instanceof StoreUnavailableError) this.outages.failed(sorted)
      throw sorted
    } finally {
      this.#finished()
    }
  }

  /** pg.Pool's own counts: totalCount includes the idle ones. */
  poolStats(): PoolStats {
    const pool = this.#pool
    return {
      inUse: pool.totalCount - pool.idleCount,
      idle: pool.idleCount,
      waiting: pool.waitingCount,
    }
  }

  async close(): Promise<void> {
    if (this.#closing) return
    this.#closing = true
    if (this.#running > 0) {
      await new Promise<void>((resolve) => {
        this.#drained = resolve
      })
    }
    await this.#pool.end()
  }
}

/** The pool this store queries through, `poolSize` connections at most. */
export function openDatabase(url: string, session: Session, poolSize: number): Database {
  const pool = new Pool({ ...connectionConfig(url, session), max: poolSize })
  // An idle connection that fails (the server restarted, the network dropped it) is emitted
  // here; without a listener that 'error' event would end the process. The pool has already
  // discarded the connection and opens a new one on demand; the requests and readiness checks
  // that find the database away are what gets logged.
  pool.on('error', () => {})
  return new Database(pool, session)
}
