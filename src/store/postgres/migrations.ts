// Versioned schema for PostgreSQL: the versions of sqlite/migrations.ts, in PostgreSQL's types. A version
// number means the same change in both lists; one an engine does not need is absent from its list
// (2, SQLite's write probe for readiness). Append new versions; never edit one that has shipped.
import type { Migration } from '../migrations.ts'

export const postgresMigrations: Migration[] = [
  {
    version: 1,
    name: 'pets and api keys',
    // The first schema: no release predates it.
    olderReleasesMayServe: true,
    sql: `
      CREATE TABLE pets (
        -- An identity never hands an id out twice. MAXVALUE 2^53 - 1: ids reach clients as
        -- JSON numbers and the store turns them into JavaScript numbers, exact only up to there.
        id bigint GENERATED ALWAYS AS IDENTITY (MAXVALUE 9007199254740991) PRIMARY KEY,
        name text NOT NULL,
        category_id bigint NOT NULL CHECK (category_id > 0 AND category_id <= 9007199254740991),
        status text CHECK (status IN ('available', 'pending', 'sold'))
      );
      -- Serves listPets filtered by status in id order, whatever the table size.
      CREATE INDEX pets_status_id ON pets (status, id);

      CREATE TABLE api_keys (
        id text PRIMARY KEY,
        name text NOT NULL,
        hint text NOT NULL,
        hash text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL,
        revoked_at timestamptz
      );
    `,
  },
  {
    version: 3,
    name: 'idempotency keys',
    // A changed meaning (D14): a release before it ignores Idempotency-Key, so beside this one
    // a client's retried create could make a second pet.
    olderReleasesMayServe: false,
    // D14: one row per (API key, Idempotency-Key), written in the same transaction as its pet;
    // the primary key decides between two instances that claim one key at once.
    sql: `
      CREATE TABLE idempotency_keys (
        api_key_id text NOT NULL,
        key text NOT NULL,
        fingerprint text NOT NULL,
        status integer NOT NULL,
        body text NOT NULL,
        location text NOT NULL,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (api_key_id, key)
      );
      -- Serves the purge of expired records.
      CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
    `,
  },
  {
    version: 4,
    name: 'migration ledger says which releases may serve',
    // D27: as sqlite/migrations.ts's version 4.
    olderReleasesMayServe: true,
    sql: `
      ALTER TABLE schema_migrations
        ADD COLUMN older_releases_may_serve boolean NOT NULL DEFAULT true;
      UPDATE schema_migrations SET older_releases_may_serve = false WHERE version = 3;
    `,
  },
  {
    version: 5,
    name: 'database environment',
    // D27: as sqlite/migrations.ts's version 5, a new table older releases never read.
    olderReleasesMayServe: true,
    sql: `
      CREATE TABLE database_environment (
        id integer PRIMARY KEY CHECK (id = 1),
        environment text NOT NULL CHECK (environment IN ('production', 'staging')),
        recorded_at timestamptz NOT NULL
      );
    `,
  },
]
