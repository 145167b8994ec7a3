// Versioned schema for SQLite. Append new versions; never edit one that has shipped.
import type { Migration } from '../migrations.ts'

export const sqliteMigrations: Migration[] = [
  {
    version: 1,
    name: 'pets and api keys',
    // The first schema: no release predates it.
    olderReleasesMayServe: true,
    sql: `
      CREATE TABLE pets (
        -- AUTOINCREMENT: an id is never handed out twice, even after the highest row is gone.
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL,
        category_id INTEGER NOT NULL CHECK (category_id > 0),
        status TEXT CHECK (status IN ('available', 'pending', 'sold'))
      );
      -- Serves listPets filtered by status in id order, whatever the table size.
      CREATE INDEX pets_status_id ON pets (status, id);

      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        hint TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL,
        revoked_at TEXT
      );
    `,
  },
  {
    version: 2,
    name: 'write probe',
    // A table only readiness writes: older releases never see it.
    olderReleasesMayServe: true,
    // D16: while writes fail, readiness commits a write to this one row, since a read (SELECT 1)
    // succeeds on a full disk. PostgreSQL needs none: its failures show on any query.
    sql: `
      CREATE TABLE write_probe (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        written_at TEXT NOT NULL,
        headroom BLOB
      );
      INSERT INTO write_probe (id, written_at) VALUES (1, '');
    `,
  },
  {
    version: 3,
    name: 'idempotency keys',
    // A changed meaning (D14): a release before it ignores Idempotency-Key, so beside this one
    // a client's retried create could make a second pet.
    olderReleasesMayServe: false,
    // D14: one row per (API key, Idempotency-Key), written in the same transaction as its pet.
    // created_at is milliseconds since the epoch, from the app's clock.
    sql: `
      CREATE TABLE idempotency_keys (
        api_key_id TEXT NOT NULL,
        key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        status INTEGER NOT NULL,
        body TEXT NOT NULL,
        location TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (api_key_id, key)
      );
      -- Serves the purge of expired records.
      CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
    `,
  },
  {
    version: 4,
    name: 'migration ledger says which releases may serve',
    // D27: each migration records whether releases that predate it may keep serving. Releases
    // before this one read only the ledger's version column and name its columns when they
    // insert, so they ignore the new one (the upgrade test runs the previous release on it).
    olderReleasesMayServe: true,
    sql: `
      ALTER TABLE schema_migrations
        ADD COLUMN older_releases_may_serve INTEGER NOT NULL DEFAULT 1
        CHECK (older_releases_may_serve IN (0, 1));
      UPDATE schema_migrations SET older_releases_may_serve = 0 WHERE version = 3;
    `,
  },
  {
    version: 5,
    name: 'database environment',
    // A new table, which releases before it never read: they serve on.
    olderReleasesMayServe: true,
    // Who made the database: the PETSTORE_ENV of the process whose migrations made it, written
    // once by the runner (../migrations.ts) in the same transaction, never on a database that
    // had a ledger already (who made that one is unknown). The staging commands change only a
    // database that says staging. No row: made before this migration.
    sql: `
      CREATE TABLE database_environment (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        environment TEXT NOT NULL CHECK (environment IN ('production', 'staging')),
        recorded_at TEXT NOT NULL
      );
    `,
  },
]
