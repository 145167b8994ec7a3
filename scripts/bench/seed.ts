// The benchmark's SQLite seeds, fast: the schema comes from the service's own migrations, then
// one transaction and one prepared statement insert every row (synchronous=OFF here only: a seed
// that dies half-way is simply thrown away and redone). Written to `<path>.tmp` and renamed, so a
// file at `path` is always a complete seed. Cached as .bench/seed-<count>-<fingerprint>.db, the
// fingerprint hashing the migrations and this file, so that a schema change reseeds; every server
// works on a fresh copy of it, because createPet writes.
import { createHash } from 'node:crypto'
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
} from 'node:fs'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { parseArgs } from 'node:util'
import { sqliteMigrations } from '../../src/store/sqlite/migrations.ts'
import { openSqliteStore } from '../../src/store/sqlite/store.ts'
import { BENCH_DIR, log } from './harness.ts'

const NAMES = ['Rex', 'Bella', 'Milo', 'Luna', 'Oscar', 'Coco', 'Simba', 'Nala', 'Bruno', 'Kiwi']
const STATUSES = ['available', 'pending', 'sold', null] as const

/** Removes a SQLite file and its write-ahead log. */
export function removeDatabase(path: string): void {
  for (const suffix of ['', '-wal', '-shm']) rmSync(path + suffix, { force: true })
}

export async function seed(count: number, path: string): Promise<void> {
  const tmp = `${path}.tmp`
  removeDatabase(tmp)
  const store = openSqliteStore({ path: tmp })
  await store.migrate()
  await store.close()

  const db = new DatabaseSync(tmp)
  db.exec('PRAGMA synchronous = OFF')
  const insert = db.prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?)')
  db.exec('BEGIN')
  // The pet at position i: deterministic, so every seed is the same.
  for (let i = 1; i <= count; i++) {
    const name = `${NAMES[i % NAMES.length]} the ${i % 7 === 0 ? 'Brave' : 'Second'} #${i}`
    insert.run(name, ((i * 7919) % 100) + 1, STATUSES[i % STATUSES.length] ?? null)
  }
  db.exec('COMMIT')
  db.exec('PRAGMA wal_checkpoint(TRUNCATE)')
  db.close()
  for (const suffix of ['-wal', '-shm']) rmSync(tmp + suffix, { force: true })
  renameSync(tmp, path)
}

const fingerprint = () =>
  createHash('sha256')
    .update(readFileSync(new URL(import.meta.url), 'utf8') + JSON.stringify(sqliteMigrations))
    .digest('hex')
    .slice(0, 12)

/** Seeds under way: two servers measured at once (instructions, ab) wait for the same one. */
const seeding = new Map<number, Promise<string>>()

/** The cached seed of `count` pets, seeded (and older seeds of that count removed) if needed. */
export function cachedSeed(count: number): Promise<string> {
  const made = seeding.get(count) ?? seedOnce(count)
  seeding.set(count, made)
  made.catch(() => seeding.delete(count))
  return made
}

async function seedOnce(count: number): Promise<string> {
  mkdirSync(BENCH_DIR, { recursive: true })
  const name = `seed-${count}-${fingerprint()}.db`
  const path = join(BENCH_DIR, name)
  // Renamed into place once whole, and named by the schema: a file there is a complete seed.
  if (existsSync(path)) return path
  for (const stale of readdirSync(BENCH_DIR)) {
    if (stale.startsWith(`seed-${count}-`)) rmSync(join(BENCH_DIR, stale), { force: true })
  }
  log(`seeding ${count.toLocaleString('en')} pets (cached as .bench/${name})…`)
  const started = performance.now()
  await seed(count, path)
  log(`seeded in ${((performance.now() - started) / 1000).toFixed(1)} s`)
  return path
}

/** A fresh copy of the seed of `count` pets, .bench/<name>.db, for one server to write to. */
export async function seededCopy(count: number, name: string): Promise<string> {
  const from = await cachedSeed(count)
  const copy = join(BENCH_DIR, `${name}.db`)
  removeDatabase(copy)
  copyFileSync(from, copy)
  return copy
}

export const usage = '[--pets 1000000]   the cached SQLite seed, made now if it is not there'

/** `npm run bench -- seed`: makes the cached seed ahead of a run. */
export async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { pets: { type: 'string' } } })
  log(await cachedSeed(Number(values.pets ?? 1_000_000)))
}
