// D27: a database's migration ledger written as a newer release would write it, for the tests of
// what a release does with migrations it does not know (the store contract, test/upgrades.test.ts,
// test/upgrade/upgrade.ts), on either engine.
import { DatabaseSync } from 'node:sqlite'
import type { LedgerEntry } from '../../src/store/migrations.ts'
import { onDatabase } from './postgres.ts'

export interface Ledger {
  add(entry: LedgerEntry): Promise<void>
  remove(version: number): Promise<void>
}

/** The ledger of the PostgreSQL database at `url`, written straight to it. */
export function postgresLedger(url: string): Ledger {
  return {
    add: ({ version, name, olderReleasesMayServe }) =>
      onDatabase(url, async (client) => {
        await client.query(
          'INSERT INTO schema_migrations (version, name, applied_at, older_releases_may_serve) VALUES ($1, $2, now(), $3)',
          [version, name, olderReleasesMayServe],
        )
      }),
    remove: (version) =>
      onDatabase(url, async (client) => {
        await client.query('DELETE FROM schema_migrations WHERE version = $1', [version])
      }),
  }
}

/** The ledger of the SQLite file at `path`, through a connection of its own (another process's). */
export function sqliteLedger(path: string): Ledger {
  const onFile = async (work: (db: DatabaseSync) => unknown) => {
    const db = new DatabaseSync(path)
    try {
      work(db)
    } finally {
      db.close()
    }
  }
  return {
    add: ({ version, name, olderReleasesMayServe }) =>
      onFile((db) =>
        db
          .prepare(
            'INSERT INTO schema_migrations (version, name, applied_at, older_releases_may_serve) VALUES (?, ?, ?, ?)',
          )
          .run(version, name, new Date().toISOString(), olderReleasesMayServe ? 1 : 0),
      ),
    remove: (version) =>
      onFile((db) => db.prepare('DELETE FROM schema_migrations WHERE version = ?').run(version)),
  }
}
