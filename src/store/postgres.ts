// The scale-out store: PostgreSQL through `pg`, shared by any number of stateless instances.
//
// Durability (D10): every create is its own INSERT, committed before it resolves; the server's
// default synchronous_commit (on) means that COMMIT returned only after the WAL was flushed.
// PostgreSQL already commits concurrent transactions with one flush, so no batching is needed
// here to keep that affordable.
//
// Availability: the database may vanish and come back at any time. Every way that shows up
// (refused or reset connections, timeouts, a server shutting down) becomes a
// StoreUnavailableError, which the HTTP layer answers with 503. Timeouts bound every wait, so a
// request never hangs on a dead network, and the pool opens fresh connections once the database
// is back, so the service recovers by itself. The outage is logged once when it starts, at
// intervals while it lasts and once when it ends (outages.ts), not once per request.
import { Client, type ClientConfig, type CustomTypesConfig, Pool, types } from 'pg'
import type { DatabasePooler } from '../config.ts'
import type { NewPet, Pet, PetStatus } from '../contract/schemas.ts'
import type { OutageLogger } from '../outage-log.ts'
import { postgresMigrations } from './migrations/postgres.ts'
import { StoreOutages } from './outages.ts'
import { explainConnectFailure } from './postgres-refusals.ts'
import {
  type ApiKeyRecord,
  type ApiKeyRepository,
  type IdempotencyClaim,
  IdempotencyKeyInUseError,
  type IdempotencyRecord,
  type IdempotentCreate,
  type ListPetsQuery,
  type NewApiKeyRecord,
  type PetPage,
  type PetRepository,
  type PoolStats,
  type Store,
  type StoreObserver,
  StoreOpenError,
  StoreUnavailableError,
  unobserved,
} from './store.ts'

export interface PostgresStoreOptions {
  /** postgres://user[:password]@host[:port]/database */
  url: string
  /** The most connections this process opens. */
  poolSize: number
  /** D19: what sits between the service and PostgreSQL; 'none' (a direct connection) unless given. */
  pooler?: DatabasePooler
  /** The server cancels a statement that runs longer; STATEMENT_TIMEOUT_MS unless given. */
  statementTimeoutMs?: number
}

/** How long to wait for a connection, new or from a busy pool. */
const CONNECT_TIMEOUT_MS = 2_000
/** The server cancels a statement that runs longer (SQLSTATE 57014). */
const STATEMENT_TIMEOUT_MS = 5_000
// The client gives up on a reply this long after the statement timeout. It covers what the
// server-side timeout cannot: a server or network that has gone silent. Longer than the
// statement timeout, so that normally the server's own cancel ends a slow statement cleanly first.
const QUERY_TIMEOUT_SLACK_MS = 1_000
/**
 * D14: how long a create waits for another transaction that holds the same Idempotency-Key
 * (the unique index makes it wait) before answering 409 `idempotency_key_in_use`. A create
 * commits in milliseconds; a holder this slow is stuck or cut off.
 */
const LOCK_TIMEOUT_MS = 2_000
/** SQLSTATE lock_not_available: lock_timeout ran out. */
const LOCK_NOT_AVAILABLE = '55P03'
/** Readiness answers quickly or not at all: probes have short timeouts of their own. */
const PING_TIMEOUT_MS = 1_000
// Migrations may wait for another instance's migrations (the advisory lock) and may rewrite
// tables, so they get far more time than a request; a start still fails rather than hangs.
const MIGRATION_TIMEOUT_MS = 300_000
/** Serialises migrations across every process on the database: 'petstore' in ASCII, as int8. */
const MIGRATION_LOCK_KEY = '8099007544119226981'

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
// line, 28P01 wrong password): at start they end it with one line (postgres-refusals.ts); once
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
function sortPostgresError(err: unknown): unknown {
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
interface Session {
  pooler: DatabasePooler
  statementTimeoutMs: number
  /** The client's own limit on waiting for a reply (pg's query_timeout). */
  queryTimeoutMs: number
}

function connectionConfig(url: string, session: Session): ClientConfig {
  return {
    connectionString: url,
    application_name: 'petstore',
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    // D19: on a direct connection the timeout is set once, for the session, at no cost per
    // statement. A transaction-mode pooler refuses startup parameters (and would not keep a
    // session's settings): there every request's statement, a single one, has the role's
    // setting (README, PgBouncer) and query_timeout.
    ...(session.pooler === 'none' ? { statement_timeout: session.statementTimeoutMs } : {}),
    query_timeout: session.queryTimeoutMs,
    // TCP keepalive finds connections a silent network has cut while they sit idle in the pool.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    types: int8AsNumber,
  }
}

export interface Statement {
  /**
   * On a direct connection the name makes pg prepare the statement once per connection (D19:
   * measured 1.2 to 1.4 times the req/s of unnamed ones). Behind a transaction-mode pooler it is left out: a named
   * statement belongs to one server connection, which the pooler hands to other clients, so
   * each statement goes as the unnamed one (Parse, Bind, Execute in one round trip).
   */
  name: string
  text: string
}

export interface PetRow {
  id: number
  name: string
  categoryId: number
  status: PetStatus | null
}

interface ApiKeyRow {
  id: string
  name: string
  hint: string
  createdAt: Date
  revokedAt: Date | null
}

const PET_COLUMNS = 'id, name, category_id AS "categoryId", status'
const API_KEY_COLUMNS = 'id, name, hint, created_at AS "createdAt", revoked_at AS "revokedAt"'

const SQL = {
  insertPet: {
    name: 'pets_insert',
    text: `INSERT INTO pets (name, category_id, status) VALUES ($1, $2, $3) RETURNING ${PET_COLUMNS}`,
  },
  getPet: { name: 'pets_get', text: `SELECT ${PET_COLUMNS} FROM pets WHERE id = $1` },
  listPets: {
    name: 'pets_list',
    text: `SELECT ${PET_COLUMNS} FROM pets WHERE id > $1 ORDER BY id LIMIT $2`,
  },
  listPetsByStatus: {
    name: 'pets_list_status',
    text: `SELECT ${PET_COLUMNS} FROM pets WHERE status = $1 AND id > $2 ORDER BY id LIMIT $3`,
  },
  // D14: the record and its pet in one statement, so one round trip and no transaction to hold
  // open. The pet's id is drawn from its identity's sequence first, so that the record's text
  // can hold it. The record goes in unless a live one holds the key: on a key already held the
  // insert waits for the holder's transaction to end (the unique index), then updates the row
  // only if it has expired. The pet goes in only when the record did, so a held key writes
  // nothing and returns no row. The wait is bounded by this statement's own lock_timeout
  // (set_config(…, true) lasts to the end of the statement's transaction, here the statement
  // itself, with or without a transaction-mode pooler); it is set in the first step, before
  // the insert can wait.
  createKeyed: {
    name: 'pets_insert_keyed',
    text: `WITH new_pet AS (
        SELECT nextval(pg_get_serial_sequence('pets', 'id')) AS id,
          set_config('lock_timeout', '${LOCK_TIMEOUT_MS}', true)
      ),
      claimed AS (
        INSERT INTO idempotency_keys (api_key_id, key, fingerprint, status, body, location, created_at)
        SELECT $1, $2, $3, $4, $5::text || id || $6::text, $7::text || id || $8::text, $9
        FROM new_pet
        ON CONFLICT (api_key_id, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,
          status = EXCLUDED.status, body = EXCLUDED.body, location = EXCLUDED.location,
          created_at = EXCLUDED.created_at
        WHERE idempotency_keys.created_at <= $10
        RETURNING 1
      )
      INSERT INTO pets (id, name, category_id, status) OVERRIDING SYSTEM VALUE
      SELECT id, $11, $12, $13 FROM new_pet WHERE EXISTS (SELECT FROM claimed)
      RETURNING ${PET_COLUMNS}`,
  },
  findKey: {
    name: 'idempotency_find',
    text: `SELECT fingerprint, status, body, location, created_at AS "createdAt" FROM idempotency_keys
      WHERE api_key_id = $1 AND key = $2 AND created_at > $3`,
  },
  purgeKeys: {
    name: 'idempotency_purge',
    text: `DELETE FROM idempotency_keys WHERE ctid IN
      (SELECT ctid FROM idempotency_keys WHERE created_at <= $1 LIMIT $2)`,
  },
  insertApiKey: {
    name: 'api_keys_insert',
    text: `INSERT INTO api_keys (id, name, hint, hash, created_at) VALUES ($1, $2, $3, $4, now()) RETURNING ${API_KEY_COLUMNS}`,
  },
  findActiveApiKey: {
    name: 'api_keys_find_active',
    text: 'SELECT id FROM api_keys WHERE hash = $1 AND revoked_at IS NULL',
  },
  listApiKeys: {
    name: 'api_keys_list',
    text: `SELECT ${API_KEY_COLUMNS} FROM api_keys ORDER BY created_at, id`,
  },
  revokeApiKey: {
    name: 'api_keys_revoke',
    text: 'UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL',
  },
  countActiveApiKeys: {
    name: 'api_keys_count_active',
    text: 'SELECT count(*) AS n FROM api_keys WHERE revoked_at IS NULL',
  },
} satisfies Record<string, Statement>

/** The pet statements, for the benchmark's PostgreSQL reference, which runs the service's SQL. */
export const PET_STATEMENTS = {
  insert: SQL.insertPet,
  insertKeyed: SQL.createKeyed,
  get: SQL.getPet,
  list: SQL.listPets,
  listByStatus: SQL.listPetsByStatus,
} as const

/** SQL.createKeyed's parameters, in its order (also for the benchmark's PostgreSQL reference). */
export function keyedCreateValues(pet: NewPet, claim: IdempotencyClaim): unknown[] {
  const { status, body, location } = claim.outcome
  return [
    claim.apiKeyId,
    claim.key,
    claim.fingerprint,
    status,
    body.before,
    body.after,
    location.before,
    location.after,
    claim.now,
    claim.expiredAt,
    pet.name,
    pet.categoryId,
    pet.status ?? null,
  ]
}

export function toPet(row: PetRow): Pet {
  const pet: Pet = { id: row.id, name: row.name, categoryId: row.categoryId }
  if (row.status !== null) pet.status = row.status
  return pet
}

function toApiKey(row: ApiKeyRow): ApiKeyRecord {
  return {
    id: row.id,
    name: row.name,
    hint: row.hint,
    createdAt: row.createdAt,
    revokedAt: row.revokedAt ?? undefined,
  }
}

/**
 * The pool, with every query's errors sorted in one place, and a record of the queries still
 * running so that close() can let them finish (pg's pool.end() would strand queued ones).
 */
class Database {
  readonly #pool: Pool
  readonly session: Session
  readonly #running = new Set<Promise<unknown>>()
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
    // pg reads query_timeout from each query's config (client.js); @types/pg's QueryConfig
    // does not declare it, and a variable (not a literal) may carry the extra field.
    const config = { ...this.#prepared(statement), values, query_timeout: timeoutMs }
    const running = this.#pool.query(config)
    this.#running.add(running)
    try {
      const result = await running
      this.outages.succeeded()
      return { rows: result.rows as Row[], rowCount: result.rowCount ?? 0 }
    } catch (err) {
      const sorted = sortPostgresError(err)
      if (sorted instanceof StoreUnavailableError) this.outages.failed(sorted)
      throw sorted
    } finally {
      this.#running.delete(running)
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
    await Promise.allSettled([...this.#running])
    await this.#pool.end()
  }
}

export function openPostgresStore(options: PostgresStoreOptions): Store {
  const statementTimeoutMs = options.statementTimeoutMs ?? STATEMENT_TIMEOUT_MS
  const session: Session = {
    pooler: options.pooler ?? 'none',
    statementTimeoutMs,
    queryTimeoutMs: statementTimeoutMs + QUERY_TIMEOUT_SLACK_MS,
  }
  const pool = new Pool({ ...connectionConfig(options.url, session), max: options.poolSize })
  // An idle connection that fails (the server restarted, the network dropped it) is emitted
  // here; without a listener that 'error' event would end the process. The pool has already
  // discarded the connection and opens a new one on demand; the requests and readiness checks
  // that find the database away are what gets logged.
  pool.on('error', () => {})
  return new PostgresStore(options.url, new Database(pool, session))
}

class PostgresStore implements Store {
  readonly engine = 'postgres'
  readonly pets: PostgresPetRepository
  readonly apiKeys: PostgresApiKeyRepository
  readonly #url: string
  readonly #db: Database

  constructor(url: string, db: Database) {
    this.#url = url
    this.#db = db
    this.pets = new PostgresPetRepository(db)
    this.apiKeys = new PostgresApiKeyRepository(db)
  }

  async migrate(): Promise<number[]> {
    // A connection of its own, with the long timeouts migrations need, outside the pool.
    const client = new Client({
      ...connectionConfig(this.#url, this.#db.session),
      application_name: 'petstore migrate',
      query_timeout: MIGRATION_TIMEOUT_MS + 1_000,
    })
    // A lost connection also rejects the query in progress, which reports it; this listener
    // only keeps the 'error' event itself from ending the process.
    client.on('error', () => {})
    try {
      try {
        await client.connect()
      } catch (err) {
        // Every command connects here first: a refusal is one line naming DATABASE_URL.
        const { host, port, user = '', database = '' } = client
        throw explainConnectFailure(err, { host, port, user, database }) ?? err
      }
      return await applyMigrations(client)
    } catch (err) {
      throw err instanceof StoreOpenError || err instanceof StoreUnavailableError
        ? err
        : sortPostgresError(err)
    } finally {
      await client.end().catch(() => {})
    }
  }

  async ping(): Promise<void> {
    await this.#db.query({ name: 'ping', text: 'SELECT 1' }, [], PING_TIMEOUT_MS)
  }

  reportOutagesTo(log: OutageLogger): void {
    this.#db.outages.logTo(log)
  }

  observe(observer: StoreObserver): void {
    this.#db.observer = observer
    observer.pool?.(() => this.#db.poolStats())
  }

  async close(): Promise<void> {
    await this.#db.close()
  }
}

/**
 * Applies pending migrations in one transaction. The transaction-scoped advisory lock makes
 * instances that start together take turns: the first applies, the rest then find nothing to do.
 * DDL is transactional in PostgreSQL, so a failed migration leaves no half-made schema.
 */
async function applyMigrations(client: Client): Promise<number[]> {
  // D19: one transaction, so a transaction-mode pooler keeps it on one server connection; the
  // timeout and the lock are the transaction's own and end with it, on whatever connection.
  await client.query(`BEGIN; SET LOCAL statement_timeout = ${MIGRATION_TIMEOUT_MS}`)
  try {
    await client.query(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`)
    await client.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)',
    )
    const { rows } = await client.query<{ version: number }>(
      'SELECT version FROM schema_migrations',
    )
    const applied = new Set(rows.map((row) => row.version))
    const done: number[] = []
    for (const migration of postgresMigrations) {
      if (applied.has(migration.version)) continue
      await client.query(migration.sql)
      await client.query(
        'INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, now())',
        [migration.version, migration.name],
      )
      done.push(migration.version)
    }
    await client.query('COMMIT')
    return done
  } catch (err) {
    // On a lost connection the server has rolled back already and this fails too.
    await client.query('ROLLBACK').catch(() => {})
    throw err
  }
}

/** D14: lock_timeout ran out while another request held the key: 409, not 503. */
function keyInUse(err: unknown): never {
  if ((err as { code?: unknown }).code === LOCK_NOT_AVAILABLE) {
    throw new IdempotencyKeyInUseError('the Idempotency-Key is held by a request in flight', {
      cause: err,
    })
  }
  throw err
}

class PostgresPetRepository implements PetRepository {
  readonly #db: Database

  constructor(db: Database) {
    this.#db = db
  }

  async create(pet: NewPet): Promise<Pet> {
    // Each create is its own transaction (the INSERT autocommits), so a batch of one; the
    // server groups concurrent flushes itself. Timed with the wait for a pooled connection.
    const began = performance.now()
    const { rows } = await this.#db.query<PetRow>(SQL.insertPet, [
      pet.name,
      pet.categoryId,
      pet.status ?? null,
    ])
    this.#db.observer.committed(1, (performance.now() - began) / 1000)
    return toPet(rows[0] as PetRow)
  }

  /**
   * D14: the pet and its record in one statement (SQL.createKeyed). The primary key on
   * (api_key_id, key) decides between requests on any number of instances: a second claim waits
   * for the first's transaction and, once it has committed, inserts nothing, neither record nor
   * pet; it then reads the record to replay. No lock in this process is trusted for that.
   */
  async createIdempotent(pet: NewPet, claim: IdempotencyClaim): Promise<IdempotentCreate> {
    const began = performance.now()
    const { rows } = await this.#db
      .query<PetRow>(SQL.createKeyed, keyedCreateValues(pet, claim))
      .catch(keyInUse)
    const [row] = rows
    if (row !== undefined) {
      this.#db.observer.committed(1, (performance.now() - began) / 1000)
      return { created: toPet(row) }
    }
    const found = await this.#findRecord(claim)
    // Purged between the two statements (it had just expired): the key is new again.
    if (found === undefined) return this.createIdempotent(pet, claim)
    return { found }
  }

  async #findRecord(claim: IdempotencyClaim): Promise<IdempotencyRecord | undefined> {
    const { rows } = await this.#db.query<IdempotencyRecord>(SQL.findKey, [
      claim.apiKeyId,
      claim.key,
      claim.expiredAt,
    ])
    return rows[0]
  }

  async purgeIdempotencyRecords(expiredAt: Date, limit: number): Promise<number> {
    const { rowCount } = await this.#db.query(SQL.purgeKeys, [expiredAt, limit])
    return rowCount
  }

  async get(id: number): Promise<Pet | undefined> {
    const { rows } = await this.#db.query<PetRow>(SQL.getPet, [id])
    return rows[0] && toPet(rows[0])
  }

  async list({ limit, status, afterId }: ListPetsQuery): Promise<PetPage> {
    // One row more than asked tells whether another page follows.
    const { rows } =
      status === undefined
        ? await this.#db.query<PetRow>(SQL.listPets, [afterId, limit + 1])
        : await this.#db.query<PetRow>(SQL.listPetsByStatus, [status, afterId, limit + 1])
    return { pets: rows.slice(0, limit).map(toPet), hasMore: rows.length > limit }
  }
}

class PostgresApiKeyRepository implements ApiKeyRepository {
  readonly #db: Database

  constructor(db: Database) {
    this.#db = db
  }

  async create(key: NewApiKeyRecord): Promise<ApiKeyRecord> {
    const { rows } = await this.#db.query<ApiKeyRow>(SQL.insertApiKey, [
      key.id,
      key.name,
      key.hint,
      key.hash,
    ])
    return toApiKey(rows[0] as ApiKeyRow)
  }

  async findActiveByHash(hash: string): Promise<string | undefined> {
    const { rows } = await this.#db.query<{ id: string }>(SQL.findActiveApiKey, [hash])
    return rows[0]?.id
  }

  async list(): Promise<ApiKeyRecord[]> {
    const { rows } = await this.#db.query<ApiKeyRow>(SQL.listApiKeys, [])
    return rows.map(toApiKey)
  }

  async revoke(id: string): Promise<boolean> {
    const { rowCount } = await this.#db.query(SQL.revokeApiKey, [id])
    return rowCount > 0
  }

  async countActive(): Promise<number> {
    const { rows } = await this.#db.query<{ n: number }>(SQL.countActiveApiKeys, [])
    return rows[0]?.n ?? 0
  }
}
