// Seeds a SQLite file with `count` pets for the benchmark, fast: the schema comes from the
// service's own migrations, then one transaction and one prepared statement insert every row
// (synchronous=OFF here only: a seed that dies half-way is simply thrown away and redone).
// Writes to `<path>.tmp` and renames, so a file at `path` is always a complete seed.
//
//   node scripts/bench/seed.ts <count> <path>
import { copyFileSync, readdirSync, renameSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { openSqliteStore } from '../../src/store/sqlite/store.ts'

const NAMES = ['Rex', 'Bella', 'Milo', 'Luna', 'Oscar', 'Coco', 'Simba', 'Nala', 'Bruno', 'Kiwi']
const STATUSES = ['available', 'pending', 'sold', null] as const

/** The pet the seed stores at position i (1-based): deterministic, so every seed is the same. */
export function seededPet(i: number) {
  return {
    name: `${NAMES[i % NAMES.length]} the ${i % 7 === 0 ? 'Brave' : 'Second'} #${i}`,
    categoryId: ((i * 7919) % 100) + 1,
    status: STATUSES[i % STATUSES.length] ?? null,
  }
}

export async function seed(count: number, path: string): Promise<void> {
  const tmp = `${path}.tmp`
  for (const suffix of ['', '-wal', '-shm']) rmSync(tmp + suffix, { force: true })
  const store = openSqliteStore({ path: tmp })
  await store.migrate()
  await store.close()

  const db = new DatabaseSync(tmp)
  db.exec('PRAGMA synchronous = OFF')
  const insert = db.prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?)')
  db.exec('BEGIN')
  for (let i = 1; i <= count; i++) {
    const pet = seededPet(i)
    insert.run(pet.name, pet.categoryId, pet.status)
  }
  db.exec('COMMIT')
  db.exec('PRAGMA wal_checkpoint(TRUNCATE)')
  db.close()
  rmSync(`${tmp}-wal`, { force: true })
  rmSync(`${tmp}-shm`, { force: true })
  renameSync(tmp, path)
}

/**
 * A fresh copy of the seed of `pets` pets in `benchDir` (made by `npm run bench`), named after
 * `name`, for a server to write to; the seed itself stays as it is.
 */
export function seededCopy(benchDir: string, pets: number, name: string): string {
  const seed = readdirSync(benchDir).find(
    (file) => file.startsWith(`seed-${pets}-`) && file.endsWith('.db'),
  )
  if (seed === undefined) throw new Error(`no .bench/seed-${pets}-*.db: run npm run bench first`)
  const copy = join(benchDir, `${name}.db`)
  for (const suffix of ['', '-wal', '-shm']) rmSync(copy + suffix, { force: true })
  copyFileSync(join(benchDir, seed), copy)
  return copy
}

if (import.meta.main) {
  const [count, path] = process.argv.slice(2)
  if (!count || !path || !/^\d+$/.test(count)) {
    process.stderr.write('usage: node scripts/bench/seed.ts <count> <path>\n')
    process.exit(2)
  }
  const started = performance.now()
  await seed(Number(count), path)
  process.stdout.write(
    `seeded ${count} pets into ${path} in ${((performance.now() - started) / 1000).toFixed(1)} s\n`,
  )
}
