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
import { Client } from 'pg'
import type { DatabasePooler } from '../../config.ts'
import type { DeploymentEnv } from '../../contract/api-key.ts'
import type { OutageLogger } from '../../outage-log.ts'
import { DatabaseEnvironmentError } from '../environment.ts'
import {
  type LedgerEntry,
  type MigrationAdapter,
  type MigrationRun,
  runMigrations,
  type SchemaState,
  SchemaTooNewError,
  schemaState,
} from '../migrations.ts'
import { type Store, type StoreObserver, StoreOpenError, StoreUnavailableError } from '../store.ts'
import { PostgresApiKeyRepository } from './api-keys.ts'
import {
  connectionConfig,
  type Database,
  openDatabase,
  PING_TIMEOUT_MS,
  QUERY_TIMEOUT_SLACK_MS,
  type Session,
  STATEMENT_TIMEOUT_MS,
} from './connection.ts'
import {
  PostgresDatabaseEnvironment,
  readEnvironmentOn,
  recordNewEnvironment,
} from './environment.ts'
import { sortPostgresError } from './errors.ts'
import { postgresMigrations } from './migrations.ts'
import { PostgresPetRepository } from './pets.ts'
import { explainConnectFailure } from './refusals.ts'
import { PostgresStagingData } from './staging.ts'

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

// Migrations may wait for another instance's migrations (the advisory lock) and may rewrite
// tables, so they get far more time than a request; a start still fails rather than hangs.
const MIGRATION_TIMEOUT_MS = 300_000
/** Serialises migrations across every process on the database: 'petstore' in ASCII, as int8. */
const MIGRATION_LOCK_KEY = '8099007544119226981'

export function openPostgresStore(options: PostgresStoreOptions): Store {
  const statementTimeoutMs = options.statementTimeoutMs ?? STATEMENT_TIMEOUT_MS
  const session: Session = {
    pooler: options.pooler ?? 'none',
    statementTimeoutMs,
    queryTimeoutMs: statementTimeoutMs + QUERY_TIMEOUT_SLACK_MS,
  }
  return new PostgresStore(options.url, openDatabase(options.url, session, options.poolSize))
}

class PostgresStore implements Store {
  readonly pets: PostgresPetRepository
  readonly apiKeys: PostgresApiKeyRepository
  readonly staging: PostgresStagingData
  readonly environment: PostgresDatabaseEnvironment
  readonly #url: string
  readonly #db: Database

  constructor(url: string, db: Database) {
    this.#url = url
    this.#db = db
    this.pets = new PostgresPetRepository(db)
    this.apiKeys = new PostgresApiKeyRepository(db)
    this.staging = new PostgresStagingData(db)
    this.environment = new PostgresDatabaseEnvironment(db)
  }

  migrate(environment: DeploymentEnv = 'production'): Promise<MigrationRun> {
    return this.#onOwnConnection((client) =>
      runMigrations(migrationAdapter(client), postgresMigrations, environment),
    )
  }

  /** D27: read only, outside any transaction. */
  schema(): Promise<SchemaState> {
    return this.#onOwnConnection(async (client) =>
      schemaState(await readLedger(client), postgresMigrations, await readEnvironmentOn(client)),
    )
  }

  /** A connection of its own, with the long timeouts migrations need, outside the pool. */
  async #onOwnConnection<T>(work: (client: Client) => Promise<T>): Promise<T> {
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
      return await work(client)
    } catch (err) {
      throw err instanceof StoreOpenError ||
        err instanceof StoreUnavailableError ||
        err instanceof SchemaTooNewError ||
        err instanceof DatabaseEnvironmentError
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
    this.#db.outages.observe(observer)
    observer.pool?.(() => this.#db.poolStats())
  }

  async close(): Promise<void> {
    await this.#db.close()
  }
}

/**
 * PostgreSQL's side of the migrations (../migrations.ts). The transaction-scoped advisory lock makes
 * instances that start together take turns: the first applies, the rest then find nothing to
 * do. DDL is transactional in PostgreSQL, so a failed migration leaves no half-made schema.
 */
function migrationAdapter(client: Client): MigrationAdapter {
  return {
    begin: async () => {
      // D19: one transaction, so a transaction-mode pooler keeps it on one server connection;
      // the timeout and the lock are the transaction's own and end with it, on any connection.
      await client.query(`BEGIN; SET LOCAL statement_timeout = ${MIGRATION_TIMEOUT_MS}`)
      await client.query(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`)
    },
    ledger: async () => {
      await client.query(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)',
      )
      return readLedger(client)
    },
    environment: () => readEnvironmentOn(client),
    apply: async (migration) => {
      await client.query(migration.sql)
      // Before migration 4 the ledger has no column for the flag; rows without it read as true.
      if (await ledgerHasFlag(client)) {
        await client.query(
          'INSERT INTO schema_migrations (version, name, applied_at, older_releases_may_serve) VALUES ($1, $2, now(), $3)',
          [migration.version, migration.name, migration.olderReleasesMayServe],
        )
      } else {
        await client.query(
          'INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, now())',
          [migration.version, migration.name],
        )
      }
    },
    recordEnvironment: (environment) => recordNewEnvironment(client, environment),
    commit: async () => {
      await client.query('COMMIT')
    },
    // On a lost connection the server has rolled back already and this fails too.
    rollback: async () => {
      await client.query('ROLLBACK').catch(() => {})
    },
  }
}

/** D27: the ledger as it is, made by no one: empty where there is none yet. */
async function readLedger(client: Client): Promise<LedgerEntry[]> {
  const { rows: present } = await client.query<{ present: boolean }>(
    "SELECT to_regclass('schema_migrations') IS NOT NULL AS present",
  )
  if (present[0]?.present !== true) return []
  const flag = (await ledgerHasFlag(client)) ? 'older_releases_may_serve' : 'true'
  const { rows } = await client.query<{ version: number; name: string; may_serve: boolean }>(
    `SELECT version, name, ${flag} AS may_serve FROM schema_migrations`,
  )
  return rows.map((row) => ({
    version: row.version,
    name: row.name,
    olderReleasesMayServe: row.may_serve,
  }))
}

/** Whether the ledger has migration 4's column (older releases made it without). */
async function ledgerHasFlag(client: Client): Promise<boolean> {
  const { rows } = await client.query(
    `SELECT 1 FROM pg_attribute
      WHERE attrelid = to_regclass('schema_migrations') AND attname = 'older_releases_may_serve' AND NOT attisdropped`,
  )
  return rows.length > 0
}
