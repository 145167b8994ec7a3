// D16 on PostgreSQL: the disk under the pets table fills up. A create gets StoreUnavailableError
// saying the disk is full (a 503 with Retry-After: 10 over HTTP, never a 500), and once space is
// freed, creates commit again and every pet acknowledged before is still there.
//
// A real full disk: a small tmpfs mounted for the test (root only, and PostgreSQL on this
// machine; elsewhere the test is skipped with a one-line notice), made a tablespace that the
// pets table is moved to, and a filler file that takes the rest of it.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { openPostgresStore } from '../../src/store/postgres/store.ts'
import { type Store, StoreUnavailableError } from '../../src/store/store.ts'
import { fillDisk } from '../helpers/full-disk.ts'
import {
  ADMIN_URL,
  createTestDatabase,
  onDatabase,
  postgresSkipReason,
  type TestDatabase,
} from '../helpers/postgres.ts'
import { tempDir } from '../helpers/server.ts'

const TABLESPACE = `petstore_full_${process.pid}`

const sql = (url: string, text: string) => onDatabase(url, (client) => client.query(text))

const dir = await tempDir()
let skip = await postgresSkipReason()
if (skip === undefined) {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir.path], { stdio: 'pipe' })
    // The server writes the tablespace as its own user.
    execFileSync('chown', ['postgres:postgres', dir.path], { stdio: 'pipe' })
  } catch {
    skip = 'cannot mount a tmpfs for PostgreSQL here (needs root): the full-disk test is skipped'
    console.log(skip)
  }
}

describe('PostgreSQL: the disk under the pets table fills up, then space is freed', {
  skip,
}, () => {
  const filler = join(dir.path, 'filler')
  let db: TestDatabase
  let store: Store
  const acknowledged: number[] = []

  before(async () => {
    db = await createTestDatabase()
    store = openPostgresStore({ url: db.url, poolSize: 2 })
    await store.migrate()
    await sql(ADMIN_URL, `CREATE TABLESPACE ${TABLESPACE} LOCATION '${dir.path}'`)
    await sql(db.url, `ALTER TABLE pets SET TABLESPACE ${TABLESPACE}`)
    for (let i = 0; i < 5; i++) {
      acknowledged.push((await store.pets.create({ name: `before ${i}`, categoryId: 1 })).id)
    }
    fillDisk(filler)
  })

  after(async () => {
    await store?.close()
    await db?.drop()
    await sql(ADMIN_URL, `DROP TABLESPACE IF EXISTS ${TABLESPACE}`).catch(() => {})
    execFileSync('umount', [dir.path], { stdio: 'pipe' })
    await dir.remove()
  })

  test('creates fail as unavailable, saying the disk is full, with Retry-After 10', async () => {
    // Rows go to the table's last page until it is full; the next one needs a page the disk
    // has no room for. A page holds far fewer than 2,000 pets.
    let failure: unknown
    for (let i = 0; i < 2000 && failure === undefined; i++) {
      try {
        acknowledged.push((await store.pets.create({ name: `filling ${i}`, categoryId: 1 })).id)
      } catch (err) {
        failure = err
      }
    }
    assert.ok(failure instanceof StoreUnavailableError, `failed with ${String(failure)}`)
    assert.equal(failure.reason, "the database's disk is full")
    assert.equal(failure.retryAfterSeconds, 10)
  })

  test('once space is freed, creates commit again and nothing acknowledged is lost', async () => {
    rmSync(filler)
    const after = await store.pets.create({ name: 'after', categoryId: 1 })
    acknowledged.push(after.id)
    for (const id of acknowledged) assert.ok(await store.pets.get(id), `pet ${id}`)
  })
})
