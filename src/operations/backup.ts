// `petstore backup`, an operations tool above the store (docs/architecture.md: operations apart
// from the engines): it works on the database file while a service may be using it, never
// through a Store.
import { closeSync, existsSync, linkSync, openSync, rmSync, statSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { backup, DatabaseSync } from 'node:sqlite'
import { BUSY_TIMEOUT_MS, LOCK_TIMEOUT_MS, retryWhileBusy } from '../store/sqlite/failures.ts'

/**
 * `petstore backup`: a consistent copy of a live database file through SQLite's online backup
 * API, so the service keeps serving (and writing) meanwhile. Returns what the copy holds, as an
 * operator checks a backup: its size, and its pets and API keys, counted in the copy itself.
 *
 * The whole file is copied in one step. In steps of a few pages (node:sqlite's default is 100),
 * every write by the service between two steps restarts the copy, so a busy service's backup
 * may never finish; in one step it takes about a second per 200 MB (docs/benchmarks.md,
 * "Measurements behind choices in the code"). In WAL
 * mode the service's writes do not wait for the copy meanwhile.
 *
 * The copy is written under a temporary name and renamed when complete, so an interrupted
 * backup never leaves a file that looks like a good one; an existing file is never overwritten.
 * Like a new database (store/sqlite/store.ts), the copy is the owner's only.
 */
export async function backupSqliteDatabase(
  sourcePath: string,
  targetPath: string,
): Promise<BackupSummary> {
  if (sourcePath === ':memory:') throw new Error('an in-memory database has nothing to back up')
  if (!existsSync(sourcePath)) throw new Error(`there is no database at ${sourcePath}`)
  if (resolve(sourcePath) === resolve(targetPath)) {
    throw new Error('the backup must go to another file than the database itself')
  }
  if (!existsSync(dirname(targetPath))) {
    throw new Error(`the folder ${dirname(targetPath)} does not exist`)
  }
  if (existsSync(targetPath)) throw new Error(`${targetPath} exists already; choose a new file`)
  const partial = `${targetPath}.partial-${process.pid}`
  const source = new DatabaseSync(sourcePath, { timeout: BUSY_TIMEOUT_MS })
  try {
    // D10: key hashes and names, owner-only like ssh keys from the first byte on,
    // not chmod'ed later; SQLite keeps the mode of the file it writes into, and the target, a
    // link, shares it. An interrupted backup's partial may bear this PID (a container's often
    // does); it is replaced, and 'wx' never writes into a file made by anyone else meanwhile.
    rmSync(partial, { force: true })
    closeSync(openSync(partial, 'wx', 0o600))
    // A copy that finds the file locked starts again, like every other write (store/sqlite/failures.ts).
    await retryWhileBusy(() => backup(source, partial, { rate: ALL_PAGES }), LOCK_TIMEOUT_MS)
    const contents = countContents(partial)
    // A link, unlike a rename, fails if the target has appeared meanwhile.
    linkSync(partial, targetPath)
    return { bytes: statSync(targetPath).size, ...contents }
  } finally {
    source.close()
    rmSync(partial, { force: true })
  }
}

export interface BackupSummary {
  bytes: number
  pets: number
  apiKeys: number
  activeApiKeys: number
}

/**
 * Counted in the finished copy: what a restore from it would serve. Opened for writing though
 * it only reads: the copy is in WAL mode, and a read-only connection leaves its -wal and -shm
 * files behind, which the last writable connection removes as it closes.
 */
function countContents(path: string): Omit<BackupSummary, 'bytes'> {
  const copy = new DatabaseSync(path)
  try {
    const count = (sql: string) => Number((copy.prepare(sql).get() as { n: number }).n)
    return {
      pets: count('SELECT count(*) AS n FROM pets'),
      apiKeys: count('SELECT count(*) AS n FROM api_keys'),
      activeApiKeys: count('SELECT count(*) AS n FROM api_keys WHERE revoked_at IS NULL'),
    }
  } finally {
    copy.close()
  }
}

/** The largest step node:sqlite accepts (a positive int32): every page at once. */
const ALL_PAGES = 2 ** 31 - 1
