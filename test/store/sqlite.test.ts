import assert from 'node:assert/strict'
import { chmod, mkdir, readdir, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { test } from 'node:test'
import { backupSqliteDatabase } from '../../src/operations/backup.ts'
import { sqliteMigrations } from '../../src/store/sqlite/migrations.ts'
import { PetQueries } from '../../src/store/sqlite/pets.ts'
import { openSqliteStore } from '../../src/store/sqlite/store.ts'
import { sqliteLedger } from '../helpers/ledger.ts'
import { tempDir } from '../helpers/server.ts'
import { storeContract } from './contract.ts'

storeContract('sqlite', async () => {
  const dir = await tempDir()
  let others = 0
  const path = join(dir.path, 'contract.db')
  return {
    migrations: sqliteMigrations,
    open: async () => openSqliteStore({ path }),
    reopen: async () => openSqliteStore({ path }),
    ledger: sqliteLedger(path),
    another: async () => {
      const other = join(dir.path, `another-${++others}.db`)
      return {
        open: async () => openSqliteStore({ path: other }),
        exec: async (sql) => {
          const db = new DatabaseSync(other)
          try {
            db.exec(sql)
          } finally {
            db.close()
          }
        },
        cleanup: async () => {},
      }
    },
    cleanup: dir.remove,
  }
})

// A statement left open stops SQLite from checkpointing, and the -wal file then grows without
// bound: measured with `INSERT … RETURNING id` read by get() outside a transaction, the -wal
// reached 1.1 GB after about 130,000 inserts while the database file stayed at 4 KB. Many
// creates must leave it at about SQLite's 1000-page checkpoint size.
test('sqlite: the WAL stays bounded over many creates', async () => {
  const dir = await tempDir()
  const path = join(dir.path, 'wal.db')
  const store = openSqliteStore({ path })
  try {
    await store.migrate()
    for (let round = 0; round < 60; round++) {
      await Promise.all(
        Array.from({ length: 500 }, (_, i) =>
          store.pets.create({ name: `pet ${round}-${i} ${'x'.repeat(100)}`, categoryId: 1 }),
        ),
      )
      await store.pets.list({ limit: 100, afterId: round * 500 })
    }
    const wal = await stat(`${path}-wal`)
    assert.ok(wal.size < 16 * 1024 * 1024, `-wal grew to ${wal.size} bytes after 30,000 creates`)
    const db = await stat(path)
    assert.ok(db.size > 1024 * 1024, 'the rows reached the main database file (checkpointed)')
  } finally {
    await store.close()
    await dir.remove()
  }
})

// A backup taken in steps restarts whenever the service writes between two steps; under a
// steady stream of writes such a backup never finishes. It must finish, and be consistent.
test('sqlite: backup finishes under a steady stream of writes, into a consistent copy', {
  // It takes about a second; a backup that keeps restarting would never end.
  timeout: 60_000,
}, async () => {
  const dir = await tempDir()
  const path = join(dir.path, 'live.db')
  const store = openSqliteStore({ path })
  let writing: NodeJS.Timeout | undefined
  try {
    await store.migrate()
    // ~12 MB: a few thousand of SQLite's 4 KB pages, many 100-page steps.
    for (let round = 0; round < 10; round++) {
      await Promise.all(
        Array.from({ length: 5000 }, (_, i) =>
          store.pets.create({ name: `pet ${round}-${i} ${'x'.repeat(180)}`, categoryId: 1 }),
        ),
      )
    }
    const before = (await store.pets.list({ limit: 1, afterId: 49_999 })).pets[0]
    assert.equal(before?.id, 50_000)
    let writes = 0
    writing = setInterval(() => {
      writes += 1
      void store.pets.create({ name: `during backup ${writes}`, categoryId: 2 })
    }, 2)
    const target = join(dir.path, 'copy.db')
    const copied = await backupSqliteDatabase(path, target)
    clearInterval(writing)
    assert.ok(copied.bytes > 2000 * 4096, `${copied.bytes} bytes copied`)
    assert.ok(writes > 0, 'writes went on while the backup ran')

    const copy = new DatabaseSync(target, { readOnly: true })
    try {
      assert.equal(copy.prepare('PRAGMA integrity_check').get()?.integrity_check, 'ok')
      const count = Number(copy.prepare('SELECT count(*) AS n FROM pets').get()?.n)
      assert.ok(count >= 50_000, `the copy has every pet committed before it began (${count})`)
    } finally {
      copy.close()
    }
    assert.deepEqual(
      (await readdir(dir.path)).filter((name) => name.includes('.partial-')),
      [],
      'no partial file is left behind',
    )
    await assert.rejects(backupSqliteDatabase(path, target), /exists already/)
    await assert.rejects(
      backupSqliteDatabase(path, join(dir.path, 'no such folder', 'copy.db')),
      /does not exist/,
    )
  } finally {
    clearInterval(writing)
    await store.close()
    await dir.remove()
  }
})

// D10: the database holds API key hashes and names, so what the store and a backup
// create is the owner's only, and what the operator made before keeps its mode. Run under umask
// 022, a usual one, so that the umask is not what makes them private.
/** As `ls -l` shows them, in octal. */
const permissions = async (path: string) => ((await stat(path)).mode & 0o777).toString(8)

async function underUmask022(run: () => Promise<void>): Promise<void> {
  const before = process.umask(0o022)
  try {
    await run()
  } finally {
    process.umask(before)
  }
}

test("sqlite: a new folder and database, its -wal and -shm, are the owner's only", () =>
  underUmask022(async () => {
    const dir = await tempDir()
    const path = join(dir.path, 'new', 'deeper', 'private.db')
    const store = openSqliteStore({ path })
    try {
      await store.migrate()
      await store.pets.create({ name: 'written to the WAL', categoryId: 1 })
      for (const folder of [join(dir.path, 'new'), join(dir.path, 'new', 'deeper')]) {
        assert.equal(await permissions(folder), '700', folder)
      }
      for (const file of [path, `${path}-wal`, `${path}-shm`]) {
        assert.equal(await permissions(file), '600', file)
      }
    } finally {
      await store.close()
      await dir.remove()
    }
  }))

test('sqlite: an existing folder and database file keep their modes', () =>
  underUmask022(async () => {
    const dir = await tempDir()
    const folder = join(dir.path, 'data')
    await mkdir(folder)
    await chmod(folder, 0o755)
    const path = join(folder, 'existing.db')
    await writeFile(path, '')
    await chmod(path, 0o640)
    const store = openSqliteStore({ path })
    try {
      await store.migrate()
      await store.pets.create({ name: 'in an existing file', categoryId: 1 })
      assert.equal(await permissions(folder), '755')
      assert.equal(await permissions(path), '640')
    } finally {
      await store.close()
      await dir.remove()
    }
  }))

test("sqlite: a backup is the owner's only, even over an earlier partial with this PID", () =>
  underUmask022(async () => {
    const dir = await tempDir()
    const path = join(dir.path, 'source.db')
    const store = openSqliteStore({ path })
    try {
      await store.migrate()
      await store.pets.create({ name: 'backed up', categoryId: 1 })
      // Whatever the database's own mode is.
      await chmod(path, 0o644)
      const target = join(dir.path, 'copy.db')
      // An interrupted backup's partial, readable by all, under the name this one will use.
      const stale = `${target}.partial-${process.pid}`
      await writeFile(stale, '')
      await chmod(stale, 0o644)
      const copied = await backupSqliteDatabase(path, target)
      assert.equal(copied.pets, 1)
      assert.equal(await permissions(target), '600')
      // The earlier partial is gone with this one's.
      assert.deepEqual((await readdir(dir.path)).sort(), [
        'copy.db',
        'source.db',
        'source.db-shm',
        'source.db-wal',
      ])
    } finally {
      await store.close()
      await dir.remove()
    }
  }))

// A page's row count is written into its statement's SQL (PetQueries): only a page's (1 to the
// largest limit and one more) may be, and each count gets its own statement, so pages of
// different sizes never share one.
test('sqlite: a page is as long as its count, and a count no page has is refused', async () => {
  const dir = await tempDir()
  const path = join(dir.path, 'pages.db')
  const store = openSqliteStore({ path })
  try {
    await store.migrate()
    for (let i = 0; i < 6; i++) await store.pets.create({ name: `pet ${i}`, categoryId: 1 })
  } finally {
    await store.close()
  }
  const db = new DatabaseSync(path)
  try {
    const queries = new PetQueries(db)
    for (const count of [3, 1, 3, 6, 10]) {
      assert.equal(queries.page(count, undefined, 0).length, Math.min(count, 6))
    }
    assert.deepEqual(
      queries.page(2, undefined, 4).map((row) => row[0]),
      [5, 6],
    )
    for (const count of [0, -1, 1.5, Number.NaN, 102, 2 ** 53]) {
      assert.throws(() => queries.page(count, undefined, 0), RangeError)
    }
  } finally {
    db.close()
    await dir.remove()
  }
})

// The migrations' transaction is the connection's: a second migrate() on the same store waits
// for the first, then finds nothing to apply, instead of beginning or ending its transaction.
test('sqlite: two migrate() calls on one store apply each migration once, together', async () => {
  const dir = await tempDir()
  const store = openSqliteStore({ path: join(dir.path, 'twice.db') })
  try {
    const [first, second] = await Promise.all([store.migrate(), store.migrate()])
    assert.deepEqual(
      first.applied.map((migration) => migration.version),
      sqliteMigrations.map((migration) => migration.version),
    )
    assert.deepEqual(second, { applied: [], newer: [], environment: 'production' })
  } finally {
    await store.close()
    await dir.remove()
  }
})

// The reads answer in the caller's turn (store.ts, MaybePromise): the handler then sends the
// answer without a promise or a microtask between (docs/benchmarks.md, "Where the time goes").
test('sqlite: a read that needs no wait answers at once, not in a promise', async () => {
  const dir = await tempDir()
  const store = openSqliteStore({ path: join(dir.path, 'reads.db') })
  try {
    await store.migrate()
    const created = await store.pets.create({ name: 'Rex', categoryId: 1 })
    const got = store.pets.get(created.id)
    assert.ok(!(got instanceof Promise))
    assert.deepEqual(got, created)
    assert.equal(store.pets.get(created.id + 1), undefined)
    const page = store.pets.list({ limit: 10, afterId: 0 })
    assert.ok(!(page instanceof Promise))
    assert.deepEqual(page, { pets: [created], hasMore: false })
  } finally {
    await store.close()
    await dir.remove()
  }
})
