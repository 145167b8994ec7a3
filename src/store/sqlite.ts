// The embedded store: SQLite through Node's built-in node:sqlite (no native addon).
//
// Durability (D10): WAL with synchronous=FULL, so a COMMIT returns only after the log is fsync'd.
// To keep that affordable, concurrent creates are committed together (group commit): each
// create joins a queue, and one transaction per event-loop turn inserts the whole queue and
// commits once. Every caller's promise settles only after that commit.
//
// The commit runs on the event loop, which waits for the fsync. Committing on a writer thread
// instead (its own connection; the loop serving requests meanwhile) was measured and dropped:
// no faster at 50 connections, 6–17% slower at 10, with the server on one core (the thread's
// hand-offs cost more than the fsync wait they save; docs/benchmarks.md).
//
// D16: no wait blocks the event loop, and a failing disk is a 503 said once (sqlite-failures.ts):
// a lock held by another process is waited for in short tries on timers; a full, read-only or
// failing disk answers 503 with what happened, is logged once (outages.ts), and turns readiness
// 503 until a write commits again.
import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import { DatabaseSync, type StatementSync } from 'node:sqlite'
import { setTimeout as sleep } from 'node:timers/promises'
import { LIST_LIMIT } from '../contract/limits.ts'
import type { NewPet, Pet, PetStatus } from '../contract/schemas.ts'
import type { OutageLogger } from '../outage-log.ts'
import { sqliteMigrations } from './migrations/sqlite.ts'
import { StoreOutages } from './outages.ts'
import {
  Backoff,
  BUSY_TIMEOUT_MS,
  isBusy,
  LOCK_TIMEOUT_MS,
  lockedError,
  retryWhileBusy,
  sortSqliteError,
} from './sqlite-failures.ts'
import {
  type ApiKeyRecord,
  type ApiKeyRepository,
  type IdempotencyClaim,
  type IdempotencyRecord,
  type IdempotentCreate,
  type ListPetsQuery,
  type NewApiKeyRecord,
  type PetPage,
  type PetRepository,
  type Store,
  type StoreObserver,
  StoreOpenError,
  StoreUnavailableError,
  unobserved,
  withId,
} from './store.ts'

export interface SqliteStoreOptions {
  /** A file path, or ':memory:'. */
  path: string
  /** How long a write waits for another process's lock before a 503 (default 5 s). */
  lockTimeoutMs?: number
}

/** A pets row, selected as PET_COLUMNS, as node:sqlite returns it with setReturnArrays. */
export type PetRow = [id: number, name: string, categoryId: number, status: PetStatus | null]

interface IdempotencyRow {
  fingerprint: string
  status: number
  body: string
  location: string
  createdAt: number
}

interface ApiKeyRow {
  id: string
  name: string
  hint: string
  createdAt: string
  revokedAt: string | null
}

const PET_COLUMNS = 'id, name, category_id, status'

/** Readiness answers quickly: a write probe waits this long at most for a lock. */
const PROBE_TIMEOUT_MS = 1_000

/**
 * Readiness while writes fail writes this much, so that "ready" means room for more than the
 * smallest write: a one-row probe can fit in the space a failed batch left allocated.
 */
const PROBE_HEADROOM_BYTES = 64 * 1024

/** A row as the contract's Pet: its fields in the schema's order, `status` left out when null. */
export function toPet(row: PetRow): Pet {
  const pet: Pet = { id: row[0], name: row[1], categoryId: row[2] }
  if (row[3] !== null) pet.status = row[3]
  return pet
}

/**
 * Rows of pets come as arrays, not objects: node:sqlite's row objects are slow to make and to
 * read. Measured in the service, CPU per request: a page of 20 145 → 119 µs, of 100 250 →
 * 171 µs, getPet 75 → 69 µs (docs/benchmarks.md).
 */
function preparePetQuery(db: DatabaseSync, sql: string): StatementSync {
  const statement = db.prepare(sql)
  statement.setReturnArrays(true)
  return statement
}

/** The most rows a page reads: the largest listPets limit, and one more to tell if more follow. */
const MAX_PAGE_ROWS = LIST_LIMIT.maximum + 1

/**
 * The pet reads as prepared statements, for the store and for the benchmark's references, so
 * that both run the same SQL. A page's LIMIT is written into its statement, one statement per
 * row count from 1 to MAX_PAGE_ROWS, each prepared when first needed: SQLite reads the value
 * bound to a LIMIT while planning (sqlite3ExprIsInteger), which marks the statement as
 * depending on it, and a statement whose such value is bound again is prepared again on its
 * next run, parsing and planning the SQL on every page (what that cost: docs/benchmarks.md).
 */
export class PetQueries {
  readonly #db: DatabaseSync
  readonly #byId: StatementSync
  readonly #pages: StatementSync[] = []
  readonly #pagesByStatus: StatementSync[] = []

  constructor(db: DatabaseSync) {
    this.#db = db
    this.#byId = preparePetQuery(db, `SELECT ${PET_COLUMNS} FROM pets WHERE id = ?`)
  }

  /** The row of pet `id`, or undefined. */
  get(id: number): PetRow | undefined {
    return this.#byId.get(id) as unknown as PetRow | undefined
  }

  /** Up to `count` rows after `afterId` in id order, only those with `status` when given. */
  page(count: number, status: PetStatus | undefined, afterId: number): PetRow[] {
    const rows =
      status === undefined
        ? this.#statement(this.#pages, count, '').all(afterId)
        : this.#statement(this.#pagesByStatus, count, 'status = ? AND ').all(status, afterId)
    return rows as unknown as PetRow[]
  }

  #statement(cache: StatementSync[], count: number, filter: string): StatementSync {
    // The count becomes SQL text, and each count a statement kept: only a page's may.
    if (!Number.isSafeInteger(count) || count < 1 || count > MAX_PAGE_ROWS) {
      throw new RangeError(`a page is 1 to ${MAX_PAGE_ROWS} rows, not ${count}`)
    }
    cache[count] ??= preparePetQuery(
      this.#db,
      `SELECT ${PET_COLUMNS} FROM pets WHERE ${filter}id > ? ORDER BY id LIMIT ${count}`,
    )
    return cache[count]
  }
}

function toRecord(row: IdempotencyRow): IdempotencyRecord {
  return {
    fingerprint: row.fingerprint,
    status: Number(row.status),
    body: row.body,
    location: row.location,
    createdAt: new Date(Number(row.createdAt)),
  }
}

function toApiKey(row: ApiKeyRow): ApiKeyRecord {
  return {
    id: row.id,
    name: row.name,
    hint: row.hint,
    createdAt: new Date(row.createdAt),
    revokedAt: row.revokedAt === null ? undefined : new Date(row.revokedAt),
  }
}

export function openSqliteStore(options: SqliteStoreOptions): Store {
  try {
    if (options.path !== ':memory:') mkdirSync(dirname(options.path), { recursive: true })
    // Opening may wait for a lock the long way: nothing is served yet. Every later statement
    // waits only BUSY_TIMEOUT_MS per try (sqlite-failures.ts).
    const db = new DatabaseSync(options.path, { timeout: LOCK_TIMEOUT_MS })
    db.exec('PRAGMA journal_mode = WAL')
    db.exec('PRAGMA synchronous = FULL')
    db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`)
    return new SqliteStore(db, new Attempts(options.lockTimeoutMs ?? LOCK_TIMEOUT_MS))
  } catch (err) {
    throw new StoreOpenError(`cannot open the SQLite database ${options.path}`, { cause: err })
  }
}

/**
 * What every statement goes through, shared by the store and its repositories: the lock is
 * waited for on timers, failures are sorted and reported once (outages.ts), and the last failure
 * is kept while writes fail, for readiness.
 */
class Attempts {
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

class SqliteStore implements Store {
  readonly engine = 'sqlite'
  readonly #db: DatabaseSync
  readonly #attempts: Attempts
  #pets: SqlitePetRepository | undefined
  #apiKeys: SqliteApiKeyRepository | undefined
  #probe: StatementSync | undefined
  #observer: StoreObserver = unobserved

  constructor(db: DatabaseSync, attempts: Attempts) {
    this.#db = db
    this.#attempts = attempts
  }

  // Repositories prepare their statements against the migrated schema, so they are built on
  // first use, after migrate().
  get pets(): SqlitePetRepository {
    if (this.#pets === undefined) {
      this.#pets = new SqlitePetRepository(this.#db, this.#attempts)
      this.#pets.observer = this.#observer
    }
    return this.#pets
  }

  get apiKeys(): SqliteApiKeyRepository {
    this.#apiKeys ??= new SqliteApiKeyRepository(this.#db, this.#attempts)
    return this.#apiKeys
  }

  reportOutagesTo(log: OutageLogger): void {
    this.#attempts.outages.logTo(log)
  }

  observe(observer: StoreObserver): void {
    this.#observer = observer
    if (this.#pets !== undefined) this.#pets.observer = observer
  }

  async migrate(): Promise<number[]> {
    const db = this.#db
    // IMMEDIATE takes the write lock first, so two processes starting together apply each
    // migration once: the second waits (on timers), then sees it applied.
    return this.#attempts.write(() => {
      db.exec('BEGIN IMMEDIATE')
      try {
        db.exec(
          'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)',
        )
        const applied = new Set(
          db
            .prepare('SELECT version FROM schema_migrations')
            .all()
            .map((row) => Number(row.version)),
        )
        const record = db.prepare(
          'INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)',
        )
        const done: number[] = []
        for (const migration of sqliteMigrations) {
          if (applied.has(migration.version)) continue
          db.exec(migration.sql)
          record.run(migration.version, migration.name, new Date().toISOString())
          done.push(migration.version)
        }
        db.exec('COMMIT')
        return done
      } catch (err) {
        if (db.isTransaction) db.exec('ROLLBACK')
        throw err
      }
    })
  }

  /**
   * While writes fail, readiness proves a write: `SELECT 1` succeeds on a full disk. The probe
   * commits a row (with some headroom) in the one-row write_probe table, and its success ends
   * the outage.
   */
  async ping(): Promise<void> {
    if (this.#attempts.failing === undefined) {
      this.#db.prepare('SELECT 1').get()
      return
    }
    this.#probe ??= this.#db.prepare(
      `UPDATE write_probe SET written_at = ?, headroom = zeroblob(${PROBE_HEADROOM_BYTES}) WHERE id = 1`,
    )
    const probe = this.#probe
    await this.#attempts.write(() => probe.run(new Date().toISOString()), PROBE_TIMEOUT_MS)
  }

  async close(): Promise<void> {
    if (!this.#db.isOpen) return
    await this.#pets?.drain()
    this.#db.close()
  }
}

interface PendingCreate {
  pet: NewPet
  claim: IdempotencyClaim | undefined
  /** Date.now() past which it stops waiting for a lock: lockTimeoutMs from when it was queued. */
  deadline: number
  resolve: (result: IdempotentCreate) => void
  reject: (err: unknown) => void
}

class SqlitePetRepository implements PetRepository {
  readonly #db: DatabaseSync
  readonly #attempts: Attempts
  readonly #insert: StatementSync
  readonly #reads: PetQueries
  readonly #findRecord: StatementSync
  readonly #claimRecord: StatementSync
  readonly #deletePet: StatementSync
  readonly #purgeRecords: StatementSync
  #pending: PendingCreate[] = []
  /** D17: each group commit's size and duration. */
  observer: StoreObserver = unobserved
  /** Set while the queue waits for another process's lock: the pauses, the next try. */
  #backoff: Backoff | undefined
  #retry: NodeJS.Timeout | undefined

  constructor(db: DatabaseSync, attempts: Attempts) {
    this.#db = db
    this.#attempts = attempts
    this.#insert = db.prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?)')
    this.#reads = new PetQueries(db)
    this.#findRecord = db.prepare(
      'SELECT fingerprint, status, body, location, created_at AS createdAt FROM idempotency_keys WHERE api_key_id = ? AND key = ?',
    )
    // D14: a record goes in unless a live one holds the key; an expired one (created at or
    // before the last parameter) is replaced. No change means the key is held.
    this.#claimRecord = db.prepare(
      `INSERT INTO idempotency_keys (api_key_id, key, fingerprint, status, body, location, created_at)
        VALUES (?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (api_key_id, key) DO UPDATE SET fingerprint = excluded.fingerprint,
          status = excluded.status, body = excluded.body, location = excluded.location,
          created_at = excluded.created_at
        WHERE idempotency_keys.created_at <= ?`,
    )
    this.#deletePet = db.prepare('DELETE FROM pets WHERE id = ?')
    this.#purgeRecords = db.prepare(
      'DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE created_at <= ? LIMIT ?)',
    )
  }

  async create(pet: NewPet): Promise<Pet> {
    const { created } = await this.#enqueue(pet, undefined)
    return created as Pet
  }

  createIdempotent(pet: NewPet, claim: IdempotencyClaim): Promise<IdempotentCreate> {
    return this.#enqueue(pet, claim)
  }

  async purgeIdempotencyRecords(expiredAt: Date, limit: number): Promise<number> {
    const { changes } = await this.#attempts.write(() =>
      this.#purgeRecords.run(expiredAt.getTime(), limit),
    )
    return Number(changes)
  }

  #enqueue(pet: NewPet, claim: IdempotencyClaim | undefined): Promise<IdempotentCreate> {
    return new Promise((resolve, reject) => {
      const deadline = Date.now() + this.#attempts.lockTimeoutMs
      this.#pending.push({ pet, claim, deadline, resolve, reject })
      // The first create of a turn schedules the commit; the rest of the turn joins it. While
      // the queue waits for a lock, a try is already scheduled and new creates join it too.
      if (this.#pending.length === 1) setImmediate(() => this.flush())
    })
  }

  /**
   * One try: inserts every queued create in one transaction and settles their promises. If
   * another process holds the lock, the queue waits on a timer for the next try (new creates
   * join it), and the creates whose deadline has passed get a 503.
   */
  flush(): void {
    clearTimeout(this.#retry)
    this.#retry = undefined
    const batch = this.#pending
    if (batch.length === 0) return
    const db = this.#db
    try {
      // IMMEDIATE: the write lock is taken here, at the start, or not at all; a deferred BEGIN
      // could find it taken only at the first insert.
      db.exec('BEGIN IMMEDIATE')
    } catch (err) {
      if (isBusy(err)) {
        this.#waitForLock(err)
      } else {
        this.#backoff = undefined
        this.#fail(batch.splice(0), err)
      }
      return
    }
    this.#pending = []
    this.#backoff = undefined
    const began = performance.now()
    let results: IdempotentCreate[]
    try {
      results = batch.map(({ pet, claim }) => this.#insertOne(pet, claim))
      db.exec('COMMIT')
    } catch (err) {
      if (db.isTransaction) db.exec('ROLLBACK')
      this.#fail(batch, err)
      return
    }
    this.#attempts.committed()
    // Replays in the batch (a key already recorded) made no pet.
    const createdCount = results.filter((result) => result.created !== undefined).length
    this.observer.committed(createdCount, (performance.now() - began) / 1000)
    batch.forEach(({ resolve }, i) => {
      resolve(results[i] as IdempotentCreate)
    })
  }

  /**
   * One create inside the batch's transaction. D14: the pet goes in, then its record, which
   * goes in only where no live record holds the key (an expired one is replaced). The write lock
   * is held, so no other process can insert the key meanwhile, and an earlier create of this
   * same batch with the key has inserted its record already: the later one finds it taken and,
   * once the batch commits, replays it. Two creates with one key never both insert. The common
   * case, a new key, is two statements; a held key also takes back its pet (never seen outside
   * this transaction; AUTOINCREMENT skips its id) and reads the record to replay.
   */
  #insertOne(pet: NewPet, claim: IdempotencyClaim | undefined): IdempotentCreate {
    // run() and lastInsertRowid, not INSERT … RETURNING with get(): a statement left open
    // by get() stops SQLite from checkpointing and the -wal file grows without bound.
    const { lastInsertRowid } = this.#insert.run(pet.name, pet.categoryId, pet.status ?? null)
    // As a row would come back: the schema's keys in its order (routes/pets-json.ts).
    const created = toPet([Number(lastInsertRowid), pet.name, pet.categoryId, pet.status ?? null])
    if (claim === undefined) return { created }
    const { status, body, location } = claim.outcome
    const { changes } = this.#claimRecord.run(
      claim.apiKeyId,
      claim.key,
      claim.fingerprint,
      status,
      withId(body, created.id),
      withId(location, created.id),
      claim.now.getTime(),
      claim.expiredAt.getTime(),
    )
    if (Number(changes) === 1) return { created }
    this.#deletePet.run(created.id)
    const row = this.#findRecord.get(claim.apiKeyId, claim.key) as unknown as IdempotencyRow
    return { found: toRecord(row) }
  }

  /** Every create queued now has settled: waits out the tries already scheduled. */
  async drain(): Promise<void> {
    this.flush()
    while (this.#pending.length > 0) await sleep(BUSY_TIMEOUT_MS)
  }

  #waitForLock(busy: unknown): void {
    const now = Date.now()
    // Deadlines follow queue order: every create waits lockTimeoutMs from when it was queued.
    const stillWaiting = this.#pending.findIndex((create) => create.deadline > now)
    const gaveUp = this.#pending.splice(
      0,
      stillWaiting === -1 ? this.#pending.length : stillWaiting,
    )
    if (gaveUp.length > 0) this.#fail(gaveUp, lockedError(busy))
    const next = this.#pending[0]
    if (next === undefined) {
      this.#backoff = undefined
      return
    }
    this.#backoff ??= new Backoff()
    const pause = Math.min(this.#backoff.next(), next.deadline - now)
    this.#retry = setTimeout(() => this.flush(), pause)
  }

  #fail(batch: PendingCreate[], err: unknown): void {
    const failure = this.#attempts.failed(err, batch.length)
    for (const { reject } of batch) reject(failure)
  }

  async get(id: number): Promise<Pet | undefined> {
    const row = await this.#attempts.read(() => this.#reads.get(id))
    return row && toPet(row)
  }

  async list({ limit, status, afterId }: ListPetsQuery): Promise<PetPage> {
    // One row more than asked tells whether another page follows.
    const rows = await this.#attempts.read(() => this.#reads.page(limit + 1, status, afterId))
    const hasMore = rows.length > limit
    return { pets: rows.slice(0, limit).map(toPet), hasMore }
  }
}

class SqliteApiKeyRepository implements ApiKeyRepository {
  readonly #attempts: Attempts
  readonly #insert: StatementSync
  readonly #findActive: StatementSync
  readonly #list: StatementSync
  readonly #revoke: StatementSync
  readonly #countActive: StatementSync

  constructor(db: DatabaseSync, attempts: Attempts) {
    this.#attempts = attempts
    this.#insert = db.prepare(
      'INSERT INTO api_keys (id, name, hint, hash, created_at) VALUES (?, ?, ?, ?, ?)',
    )
    this.#findActive = db.prepare('SELECT id FROM api_keys WHERE hash = ? AND revoked_at IS NULL')
    this.#list = db.prepare(
      'SELECT id, name, hint, created_at AS createdAt, revoked_at AS revokedAt FROM api_keys ORDER BY created_at, id',
    )
    this.#revoke = db.prepare(
      'UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL',
    )
    this.#countActive = db.prepare('SELECT count(*) AS n FROM api_keys WHERE revoked_at IS NULL')
  }

  async create(key: NewApiKeyRecord): Promise<ApiKeyRecord> {
    const createdAt = new Date()
    await this.#attempts.write(() =>
      this.#insert.run(key.id, key.name, key.hint, key.hash, createdAt.toISOString()),
    )
    return { id: key.id, name: key.name, hint: key.hint, createdAt }
  }

  async findActiveByHash(hash: string): Promise<string | undefined> {
    const row = await this.#attempts.read(() => this.#findActive.get(hash))
    return row === undefined ? undefined : String(row.id)
  }

  async list(): Promise<ApiKeyRecord[]> {
    const rows = await this.#attempts.read(() => this.#list.all())
    return (rows as unknown as ApiKeyRow[]).map(toApiKey)
  }

  async revoke(id: string): Promise<boolean> {
    const revokedAt = new Date().toISOString()
    const { changes } = await this.#attempts.write(() => this.#revoke.run(revokedAt, id))
    return Number(changes) > 0
  }

  async countActive(): Promise<number> {
    return Number((await this.#attempts.read(() => this.#countActive.get()))?.n)
  }
}
