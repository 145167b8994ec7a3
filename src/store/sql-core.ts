// What both SQL engines share; they differ in dialect and driver, not in these: the migration
// runner over a small per-engine adapter, a Pet made from its columns, and a listPets page read
// one row long.
import type { Pet, PetStatus } from '../contract/schemas.ts'
import type { PetPage } from './store.ts'

/** One step of an engine's schema (sqlite/migrations.ts, postgres/migrations.ts). */
export interface Migration {
  version: number
  name: string
  sql: string
}

/**
 * One engine's side of applying migrations: a transaction that also makes processes starting
 * together take turns (SQLite's write lock, PostgreSQL's advisory lock), so that each migration
 * is applied once; the ledger of applied versions (schema_migrations); one migration's run.
 */
export interface MigrationAdapter {
  begin(): Promise<void>
  /** The versions applied already; the ledger is made first where there is none. */
  appliedVersions(): Promise<ReadonlySet<number>>
  /** Runs the migration's SQL and records it in the ledger. */
  apply(migration: Migration): Promise<void>
  commit(): Promise<void>
  /** After a failure; never throws, so that the failure is what is reported. */
  rollback(): Promise<void>
}

/**
 * Applies the migrations not applied yet, in order, in one transaction: all of them or, on a
 * failure, none. Resolves with the versions it applied.
 */
export async function runMigrations(
  adapter: MigrationAdapter,
  migrations: readonly Migration[],
): Promise<number[]> {
  try {
    await adapter.begin()
    const applied = await adapter.appliedVersions()
    const done: number[] = []
    for (const migration of migrations) {
      if (applied.has(migration.version)) continue
      await adapter.apply(migration)
      done.push(migration.version)
    }
    await adapter.commit()
    return done
  } catch (err) {
    await adapter.rollback()
    throw err
  }
}

/** A Pet from its columns: the schema's keys in its order, `status` left out when null (D6). */
export function petOf(id: number, name: string, categoryId: number, status: PetStatus | null): Pet {
  const pet: Pet = { id, name, categoryId }
  if (status !== null) pet.status = status
  return pet
}

/**
 * A listPets page from up to `limit + 1` rows read in id order: the extra row, when it came,
 * only says that another page follows.
 */
export function pageOf<Row>(
  rows: readonly Row[],
  limit: number,
  toPet: (row: Row) => Pet,
): PetPage {
  return { pets: rows.slice(0, limit).map(toPet), hasMore: rows.length > limit }
}
