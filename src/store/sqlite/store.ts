// The embedded store: SQLite through Node's built-in node:sqlite (no native addon).
//
// Durability (D10): WAL with synchronous=FULL, so a COMMIT returns only after the log is fsync'd.
// To keep that affordable, concurrent creates are committed together (group commit): each
// create joins a queue, and one transaction per event-loop turn inserts the whole queue and
// commits once. Every caller's promise settles only after that commit.
//
// The commit runs on the event loop, which waits for the fsync. Committing on a writer thread
// instead (its own connection; the loop serving requests meanwhile) was measured and dropped:
// no faster, and slower at few connections, with the server on one core (the thread's hand-offs
// cost more than the fsync wait they save; docs/benchmarks.md, "Tried, measured, and left out").
//
// D16: no wait blocks the event loop, and a failing disk is a 503 said once (failures.ts):
// a lock held by another process is waited for in short tries on timers; a full, read-only or
// failing disk answers 503 with what happened, is logged once (outages.ts), and turns readiness
// 503 until a write commits again.
import { closeSync, mkdirSync, openSync } from 'node:fs'
import { dirname } from 'node:path'
import { DatabaseSync, type StatementSync } from 'node:sqlite'
import type { DeploymentEnv } from '../../contract/api-key.ts'
import type { OutageLogger } from '../../outage-log.ts'
import {
  type LedgerEntry,
  type MigrationAdapter,
  type MigrationRun,
  runMigrations,
  type SchemaState,
  schemaState,
} from '../migrations.ts'
import { type CommitTracer, type Store, type StoreObserver, StoreOpenError } from '../store.ts'
import { SqliteApiKeyRepository } from './api-keys.ts'
import { Attempts } from './attempts.ts'
import { readEnvironment, recordNewEnvironment, SqliteDatabaseEnvironment } from './environment.ts'
import { BUSY_TIMEOUT_MS, LOCK_TIMEOUT_MS, retryWhileBusy } from './failures.ts'
import { sqliteMigrations } from './migrations.ts'
import { SqlitePetRepository } from './pets.ts'
import { SqliteStagingData } from './staging.ts'

export interface SqliteStoreOptions {
  /** A file path, or ':memory:'. */
  path: string
  /** How long a write waits for another process's lock before a 503 (default 5 s). */
  lockTimeoutMs?: number
}

/** Readiness answers quickly: a write probe waits this long at most for a lock. */
const PROBE_TIMEOUT_MS = 1_000

/**
 * Readiness while writes fail writes this much, so that "ready" means room for more than the
 * smallest write: a one-row probe can fit in the space a failed batch left allocated.
 */
const PROBE_HEADROOM_BYTES = 64 * 1024

export function openSqliteStore(options: SqliteStoreOptions): Store {
  try {
    if (options.path !== ':memory:') createPrivately(options.path)
    // Opening may wait for a lock the long way: nothing is served yet. Every later statement
    // waits only BUSY_TIMEOUT_MS per try (failures.ts).
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
 * D10: key hashes and names, so a new folder and a new file are the owner's only, like
 * ssh keys. SQLite gives the -wal, -shm and journal the main file's mode, so creating that file
 * first (empty is a valid empty database) covers them. An existing folder or file is the
 * operator's and keeps its mode (mkdir's mode applies only to the folders it creates).
 */
function createPrivately(path: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  try {
    closeSync(openSync(path, 'wx', 0o600))
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
  }
}

class SqliteStore implements Store {
  readonly #db: DatabaseSync
  readonly #attempts: Attempts
  // Their statements are prepared when first run (attempts.ts), so the repositories exist from
  // the start, before migrate() has made the tables.
  readonly pets: SqlitePetRepository
  readonly apiKeys: SqliteApiKeyRepository
  readonly staging: SqliteStagingData
  readonly environment: SqliteDatabaseEnvironment
  #probe: StatementSync | undefined
  #migrating: Promise<unknown> = Promise.resolve()

  constructor(db: DatabaseSync, attempts: Attempts) {
    this.#db = db
    this.#attempts = attempts
    this.pets = new SqlitePetRepository(db, attempts)
    this.apiKeys = new SqliteApiKeyRepository(db, attempts)
    this.staging = new SqliteStagingData(db, attempts)
    this.environment = new SqliteDatabaseEnvironment(db, attempts)
  }

  reportOutagesTo(log: OutageLogger): void {
    this.#attempts.outages.logTo(log)
  }

  observe(observer: StoreObserver): void {
    this.pets.observer = observer
    this.#attempts.outages.observe(observer)
  }

  traceCommits(tracer: CommitTracer): void {
    this.pets.commitTracer = tracer
  }

  /**
   * One at a time: the migration's transaction is this connection's, so a second call waits for
   * the first (and then finds nothing to apply) rather than begin or end it. Runs before the
   * store serves anything (process/prepare.ts, the CLI).
   */
  migrate(environment: DeploymentEnv = 'production'): Promise<MigrationRun> {
    const after = this.#migrating.catch(() => {})
    const run = after.then(() => this.#migrate(environment))
    this.#migrating = run
    return run
  }

  async #migrate(environment: DeploymentEnv): Promise<MigrationRun> {
    const attempts = this.#attempts
    let done: MigrationRun
    try {
      done = await runMigrations(
        migrationAdapter(this.#db, attempts.lockTimeoutMs),
        sqliteMigrations,
        environment,
      )
    } catch (err) {
      throw attempts.failed(err)
    }
    attempts.committed()
    return done
  }

  /** D27: read only, in the order of any migration under way (this connection's). */
  schema(): Promise<SchemaState> {
    const read = this.#migrating
      .catch(() => {})
      .then(() => {
        try {
          return schemaState(readLedger(this.#db), sqliteMigrations, readEnvironment(this.#db))
        } catch (err) {
          throw this.#attempts.failed(err)
        }
      })
    return read
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
    await this.pets.drain()
    this.#db.close()
  }
}

/** SQLite's side of the migrations (../migrations.ts). */
function migrationAdapter(db: DatabaseSync, lockTimeoutMs: number): MigrationAdapter {
  let began = false
  return {
    // IMMEDIATE takes the write lock first, so two processes starting together apply each
    // migration once: the second waits for it on timers (D16), then finds it applied. Once
    // the lock is held, in WAL mode (store.ts opens it so) nothing else in the transaction
    // waits, and the steps below are synchronous: no timer or I/O of this process runs
    // between BEGIN and COMMIT.
    begin: async () => {
      await retryWhileBusy(() => db.exec('BEGIN IMMEDIATE'), lockTimeoutMs)
      began = true
    },
    ledger: async () => {
      db.exec(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)',
      )
      return readLedger(db)
    },
    environment: async () => readEnvironment(db),
    apply: async (migration) => {
      db.exec(migration.sql)
      // Before migration 4 the ledger has no column for the flag; rows without it read as true.
      const flagged = ledgerHasFlag(db)
      db.prepare(
        flagged
          ? 'INSERT INTO schema_migrations (version, name, applied_at, older_releases_may_serve) VALUES (?, ?, ?, ?)'
          : 'INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)',
      ).run(
        migration.version,
        migration.name,
        new Date().toISOString(),
        ...(flagged ? [migration.olderReleasesMayServe ? 1 : 0] : []),
      )
    },
    recordEnvironment: async (environment) => {
      recordNewEnvironment(db, environment)
    },
    commit: async () => {
      db.exec('COMMIT')
    },
    // Only the transaction this run began; a failing ROLLBACK must not hide the failure.
    rollback: async () => {
      if (!began || !db.isTransaction) return
      try {
        db.exec('ROLLBACK')
      } catch {
        // The connection has ended the transaction itself.
      }
    },
  }
}

/** D27: the ledger as it is, made by no one: empty where there is none yet. */
function readLedger(db: DatabaseSync): LedgerEntry[] {
  const table = db
    .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'")
    .get()
  if (table === undefined) return []
  const flagged = ledgerHasFlag(db)
  const rows = db
    .prepare(
      `SELECT version, name, ${flagged ? 'older_releases_may_serve' : '1'} AS may_serve FROM schema_migrations`,
    )
    .all()
  return rows.map((row) => ({
    version: Number(row.version),
    name: String(row.name),
    olderReleasesMayServe: Number(row.may_serve) !== 0,
  }))
}

/** Whether the ledger has migration 4's column (older releases made it without). */
function ledgerHasFlag(db: DatabaseSync): boolean {
  const column = db
    .prepare(
      "SELECT 1 FROM pragma_table_info('schema_migrations') WHERE name = 'older_releases_may_serve'",
    )
    .get()
  return column !== undefined
}
