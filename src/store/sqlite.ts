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
import { existsSync, linkSync, mkdirSync, rmSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { backup, DatabaseSync, type StatementSync } from 'node:sqlite'
import type { NewPet, Pet, PetStatus } from '../contract/schemas.ts'
import { sqliteMigrations } from './migrations/sqlite.ts'
import {
  type ApiKeyRecord,
  type ApiKeyRepository,
  type ListPetsQuery,
  type NewApiKeyRecord,
  type PetPage,
  type PetRepository,
  type Store,
  StoreOpenError,
  StoreUnavailableError,
} from './store.ts'

export interface SqliteStoreOptions {
  /** A file path, or ':memory:'. */
  path: string
}

/** A pets row, selected as PET_COLUMNS, as node:sqlite returns it with setReturnArrays. */
type PetRow = [id: number, name: string, categoryId: number, status: PetStatus | null]

interface ApiKeyRow {
  id: string
  name: string
  hint: string
  createdAt: string
  revokedAt: string | null
}

const PET_COLUMNS = 'id, name, category_id, status'

const SQLITE_BUSY = 5

/** Another process held the write lock past the busy timeout: retryable, so a 503, not a 500. */
function unavailableIfBusy(err: unknown): unknown {
  const code = (err as { errcode?: number }).errcode
  return code !== undefined && (code & 0xff) === SQLITE_BUSY
    ? new StoreUnavailableError('the SQLite database stayed locked past the busy timeout', {
        cause: err,
      })
    : err
}

function toPet(row: PetRow): Pet {
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
    // timeout: wait up to 5 s for a lock held by another process (the CLI, another instance).
    const db = new DatabaseSync(options.path, { timeout: 5000 })
    db.exec('PRAGMA journal_mode = WAL')
    db.exec('PRAGMA synchronous = FULL')
    return new SqliteStore(db)
  } catch (err) {
    throw new StoreOpenError(`cannot open the SQLite database ${options.path}`, { cause: err })
  }
}

/**
 * `petstore backup`: a consistent copy of a live database file through SQLite's online backup
 * API, so the service keeps serving (and writing) meanwhile. Returns the number of pages copied.
 *
 * The whole file is copied in one step. In steps of a few pages (node:sqlite's default is 100),
 * every write by the service between two steps restarts the copy: measured on a 160 MB file
 * with a write every 5 ms, it had not finished after 120 s; in one step it took 0.8 s. In WAL
 * mode the service's writes do not wait for the copy meanwhile.
 *
 * The copy is written under a temporary name and renamed when complete, so an interrupted
 * backup never leaves a file that looks like a good one; an existing file is never overwritten.
 */
export async function backupSqliteDatabase(sourcePath: string, targetPath: string) {
  if (sourcePath === ':memory:') throw new Error('an in-memory database has nothing to back up')
  if (!existsSync(sourcePath)) throw new Error(`there is no database at ${sourcePath}`)
  if (resolve(sourcePath) === resolve(targetPath)) {
    throw new Error('the backup must go to another file than the database itself')
  }
  if (!existsSync(dirname(targetPath))) {
    throw new Error(`the folder ${dirname(targetPath)} does not exist`)
  }
  if (existsSync(targetPath)) throw new Error(`${targetPath} exists already; choose a new file`)
  const partial = `${targetPath}.partial-${process.pid}`
  const source = new DatabaseSync(sourcePath, { timeout: 5000 })
  try {
    const pages = await backup(source, partial, { rate: ALL_PAGES })
    // A link, unlike a rename, fails if the target has appeared meanwhile.
    linkSync(partial, targetPath)
    return pages
  } finally {
    source.close()
    rmSync(partial, { force: true })
  }
}

/** The largest step node:sqlite accepts (a positive int32): every page at once. */
const ALL_PAGES = 2 ** 31 - 1

class SqliteStore implements Store {
  readonly engine = 'sqlite'
  readonly #db: DatabaseSync
  #pets: SqlitePetRepository | undefined
  #apiKeys: SqliteApiKeyRepository | undefined

  constructor(db: DatabaseSync) {
    this.#db = db
  }

  // Repositories prepare their statements against the migrated schema, so they are built on
  // first use, after migrate().
  get pets(): SqlitePetRepository {
    this.#pets ??= new SqlitePetRepository(this.#db)
    return this.#pets
  }

  get apiKeys(): SqliteApiKeyRepository {
    this.#apiKeys ??= new SqliteApiKeyRepository(this.#db)
    return this.#apiKeys
  }

  async migrate(): Promise<number[]> {
    const db = this.#db
    db.exec(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)',
    )
    // IMMEDIATE takes the write lock first, so two processes starting together apply each
    // migration once: the second waits, then sees it applied.
    db.exec('BEGIN IMMEDIATE')
    try {
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
      db.exec('ROLLBACK')
      throw err
    }
  }

  async ping(): Promise<void> {
    this.#db.prepare('SELECT 1').get()
  }

  async close(): Promise<void> {
    if (!this.#db.isOpen) return
    this.#pets?.flush()
    this.#db.close()
  }
}

interface PendingCreate {
  pet: NewPet
  resolve: (pet: Pet) => void
  reject: (err: unknown) => void
}

class SqlitePetRepository implements PetRepository {
  readonly #db: DatabaseSync
  readonly #insert: StatementSync
  readonly #get: StatementSync
  readonly #list: StatementSync
  readonly #listByStatus: StatementSync
  #pending: PendingCreate[] = []

  constructor(db: DatabaseSync) {
    this.#db = db
    this.#insert = db.prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?)')
    this.#get = preparePetQuery(db, `SELECT ${PET_COLUMNS} FROM pets WHERE id = ?`)
    this.#list = preparePetQuery(
      db,
      `SELECT ${PET_COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ?`,
    )
    this.#listByStatus = preparePetQuery(
      db,
      `SELECT ${PET_COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`,
    )
  }

  create(pet: NewPet): Promise<Pet> {
    return new Promise((resolve, reject) => {
      this.#pending.push({ pet, resolve, reject })
      // The first create of a turn schedules the commit; the rest of the turn joins it.
      if (this.#pending.length === 1) setImmediate(() => this.flush())
    })
  }

  /** Inserts every queued create in one transaction and settles their promises. */
  flush(): void {
    const batch = this.#pending
    if (batch.length === 0) return
    this.#pending = []
    const db = this.#db
    let created: Pet[]
    try {
      db.exec('BEGIN')
      // run() and lastInsertRowid, not INSERT … RETURNING with get(): a statement left open
      // by get() stops SQLite from checkpointing and the -wal file grows without bound.
      created = batch.map(({ pet }) => {
        const { lastInsertRowid } = this.#insert.run(pet.name, pet.categoryId, pet.status ?? null)
        return { id: Number(lastInsertRowid), ...pet }
      })
      db.exec('COMMIT')
    } catch (err) {
      if (db.isTransaction) db.exec('ROLLBACK')
      for (const { reject } of batch) reject(unavailableIfBusy(err))
      return
    }
    batch.forEach(({ resolve }, i) => {
      resolve(created[i] as Pet)
    })
  }

  async get(id: number): Promise<Pet | undefined> {
    const row = this.#get.get(id) as unknown as PetRow | undefined
    return row && toPet(row)
  }

  async list({ limit, status, afterId }: ListPetsQuery): Promise<PetPage> {
    // One row more than asked tells whether another page follows.
    const rows = (status === undefined
      ? this.#list.all(afterId, limit + 1)
      : this.#listByStatus.all(status, afterId, limit + 1)) as unknown as PetRow[]
    const hasMore = rows.length > limit
    return { pets: rows.slice(0, limit).map(toPet), hasMore }
  }
}

class SqliteApiKeyRepository implements ApiKeyRepository {
  readonly #insert: StatementSync
  readonly #findActive: StatementSync
  readonly #list: StatementSync
  readonly #revoke: StatementSync
  readonly #countActive: StatementSync

  constructor(db: DatabaseSync) {
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
    this.#insert.run(key.id, key.name, key.hint, key.hash, createdAt.toISOString())
    return { id: key.id, name: key.name, hint: key.hint, createdAt }
  }

  async findActiveByHash(hash: string): Promise<string | undefined> {
    const row = this.#findActive.get(hash)
    return row === undefined ? undefined : String(row.id)
  }

  async list(): Promise<ApiKeyRecord[]> {
    return (this.#list.all() as unknown as ApiKeyRow[]).map(toApiKey)
  }

  async revoke(id: string): Promise<boolean> {
    const { changes } = this.#revoke.run(new Date().toISOString(), id)
    return Number(changes) > 0
  }

  async countActive(): Promise<number> {
    return Number(this.#countActive.get()?.n)
  }
}
