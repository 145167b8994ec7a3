// The pets and their Idempotency-Key records on SQLite: reads as prepared statements, creates
// committed together, one transaction per event-loop turn (group commit, D10), keyed creates
// and their records in the same transaction (D14).
import type { DatabaseSync, SQLInputValue, StatementSync } from 'node:sqlite'
import { setTimeout as sleep } from 'node:timers/promises'
import { LIST_LIMIT } from '../../contract/limits.ts'
import type { NewPet, Pet, PetStatus } from '../../contract/schemas.ts'
import { pageOf, petOf } from '../sql-core.ts'
import {
  type CommitTracer,
  type IdempotencyClaim,
  type IdempotencyRecord,
  type IdempotentCreate,
  type ListPetsQuery,
  type MaybePromise,
  type PetPage,
  type PetRepository,
  type StoreObserver,
  unobserved,
  withId,
} from '../store.ts'
import { type Attempts, preparedOnFirstUse } from './attempts.ts'
import { Backoff, BUSY_TIMEOUT_MS, isBusy, lockedError } from './failures.ts'
import { checkPetRows, integer, type PetRow, petRowOrNone, type RowObject, text } from './rows.ts'

/** A pets row, selected as PET_COLUMNS, as node:sqlite returns it with setReturnArrays. */
export type { PetRow } from './rows.ts'

const PET_COLUMNS = 'id, name, category_id, status'

function petOrUndefined(row: PetRow | undefined): Pet | undefined {
  return row && toPet(row)
}

/** A row as the contract's Pet (sql-core.ts). */
export function toPet(row: PetRow): Pet {
  return petOf(row[0], row[1], row[2], row[3])
}

/**
 * Rows of pets come as arrays, not objects: node:sqlite's row objects are slow to make and to
 * read, a large share of a page's CPU when measured (docs/benchmarks.md).
 */
function preparePetQuery(db: DatabaseSync, sql: string): StatementSync {
  const statement = db.prepare(sql)
  statement.setReturnArrays(true)
  return statement
}

/** The most rows a page reads: the largest listPets limit, and one more to tell if more follow. */
const MAX_PAGE_ROWS = LIST_LIMIT.maximum + 1

/**
 * The pet reads as prepared statements, for the store and for the benchmark's references, so
 * that both run the same SQL. A page's LIMIT is written into its statement, one statement per
 * row count from 1 to MAX_PAGE_ROWS, each prepared when first needed: SQLite reads the value
 * bound to a LIMIT while planning (sqlite3ExprIsInteger), which marks the statement as
 * depending on it, and a statement whose such value is bound again is prepared again on its
 * next run, parsing and planning the SQL on every page (what that cost: docs/benchmarks.md).
 */
export class PetQueries {
  readonly #db: DatabaseSync
  readonly #byId: () => StatementSync
  readonly #pages: StatementSync[] = []
  readonly #pagesByStatus: StatementSync[] = []

  constructor(db: DatabaseSync) {
    this.#db = db
    this.#byId = preparedOnFirstUse(db, `SELECT ${PET_COLUMNS} FROM pets WHERE id = ?`, true)
  }

  /** The row of pet `id`, or undefined. */
  get(id: number): PetRow | undefined {
    return petRowOrNone(this.#byId().get(id))
  }

  /** Up to `count` rows after `afterId` in id order, only those with `status` when given. */
  page(count: number, status: PetStatus | undefined, afterId: number): PetRow[] {
    const rows =
      status === undefined
        ? this.#statement(this.#pages, count, '').all(afterId)
        : this.#statement(this.#pagesByStatus, count, 'status = ? AND ').all(status, afterId)
    checkPetRows(rows)
    return rows
  }

  #statement(cache: StatementSync[], count: number, filter: string): StatementSync {
    // The count becomes SQL text, and each count a statement kept: only a page's may.
    if (!Number.isSafeInteger(count) || count < 1 || count > MAX_PAGE_ROWS) {
      throw new RangeError(`a page is 1 to ${MAX_PAGE_ROWS} rows, not ${count}`)
    }
    cache[count] ??= preparePetQuery(
      this.#db,
      `SELECT ${PET_COLUMNS} FROM pets WHERE ${filter}id > ? ORDER BY id LIMIT ${count}`,
    )
    return cache[count]
  }
}

/**
 * The SQL of a create (D14), for the store and for the benchmark's SQLite reference, which runs
 * the service's statements in its own group commit (scripts/bench/same-bytes.ts).
 */
export const PET_WRITES = {
  insert: 'INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?)',
  // D14: a record goes in unless a live one holds the key; an expired one (created at or
  // before the last parameter) is replaced. No change means the key is held.
  claimRecord: `INSERT INTO idempotency_keys (api_key_id, key, fingerprint, status, body, location, created_at)
        VALUES (?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (api_key_id, key) DO UPDATE SET fingerprint = excluded.fingerprint,
          status = excluded.status, body = excluded.body, location = excluded.location,
          created_at = excluded.created_at
        WHERE idempotency_keys.created_at <= ?`,
} as const

/** PET_WRITES.claimRecord's parameters, in its order, for the pet `id` (also for the reference). */
export function claimRecordValues(claim: IdempotencyClaim, id: number): SQLInputValue[] {
  const { status, body, location } = claim.outcome
  return [
    claim.apiKeyId,
    claim.key,
    claim.fingerprint,
    status,
    withId(body, id),
    withId(location, id),
    claim.now.getTime(),
    claim.expiredAt.getTime(),
  ]
}

function toRecord(row: RowObject): IdempotencyRecord {
  return {
    fingerprint: text(row, 'fingerprint'),
    status: integer(row, 'status'),
    body: text(row, 'body'),
    location: text(row, 'location'),
    createdAt: new Date(integer(row, 'createdAt')),
  }
}

interface PendingCreate {
  pet: NewPet
  claim: IdempotencyClaim | undefined
  /** Date.now() past which it stops waiting for a lock: lockTimeoutMs from when it was queued. */
  deadline: number
  /** D23: what tracing keeps of it, while tracing is on. */
  traced: object | undefined
  resolve: (result: IdempotentCreate) => void
  reject: (err: unknown) => void
}

export class SqlitePetRepository implements PetRepository {
  readonly #db: DatabaseSync
  readonly #attempts: Attempts
  readonly #insert: () => StatementSync
  readonly #reads: PetQueries
  readonly #findRecord: () => StatementSync
  readonly #claimRecord: () => StatementSync
  readonly #deletePet: () => StatementSync
  readonly #purgeRecords: () => StatementSync
  #pending: PendingCreate[] = []
  /** D17: each group commit's size and duration. */
  observer: StoreObserver = unobserved
  /** D23: told which creates each commit carried, while tracing is on. */
  commitTracer: CommitTracer | undefined
  /** Set while the queue waits for another process's lock: the pauses, the next try. */
  #backoff: Backoff | undefined
  #retry: NodeJS.Timeout | undefined

  constructor(db: DatabaseSync, attempts: Attempts) {
    this.#db = db
    this.#attempts = attempts
    this.#insert = preparedOnFirstUse(db, PET_WRITES.insert)
    this.#reads = new PetQueries(db)
    this.#findRecord = preparedOnFirstUse(
      db,
      'SELECT fingerprint, status, body, location, created_at AS createdAt FROM idempotency_keys WHERE api_key_id = ? AND key = ?',
    )
    this.#claimRecord = preparedOnFirstUse(db, PET_WRITES.claimRecord)
    this.#deletePet = preparedOnFirstUse(db, 'DELETE FROM pets WHERE id = ?')
    this.#purgeRecords = preparedOnFirstUse(
      db,
      'DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE created_at <= ? LIMIT ?)',
    )
  }

  async create(pet: NewPet): Promise<Pet> {
    const { created } = await this.#enqueue(pet, undefined)
    return created as Pet
  }

  createIdempotent(pet: NewPet, claim: IdempotencyClaim): Promise<IdempotentCreate> {
    return this.#enqueue(pet, claim)
  }

  async purgeIdempotencyRecords(expiredAt: Date, limit: number): Promise<number> {
    const { changes } = await this.#attempts.write(() =>
      this.#purgeRecords().run(expiredAt.getTime(), limit),
    )
    return Number(changes)
  }

  #enqueue(pet: NewPet, claim: IdempotencyClaim | undefined): Promise<IdempotentCreate> {
    return new Promise((resolve, reject) => {
      const deadline = Date.now() + this.#attempts.lockTimeoutMs
      const traced = this.commitTracer?.queued()
      this.#pending.push({ pet, claim, deadline, traced, resolve, reject })
      // The first create of a turn schedules the commit; the rest of the turn joins it. While
      // the queue waits for a lock, a try is already scheduled and new creates join it too.
      if (this.#pending.length === 1) setImmediate(() => this.flush())
    })
  }

  /**
   * One try: inserts every queued create in one transaction and settles their promises. If
   * another process holds the lock, the queue waits on a timer for the next try (new creates
   * join it), and the creates whose deadline has passed get a 503.
   */
  flush(): void {
    clearTimeout(this.#retry)
    this.#retry = undefined
    const batch = this.#pending
    if (batch.length === 0) return
    const db = this.#db
    try {
      // IMMEDIATE: the write lock is taken here, at the start, or not at all; a deferred BEGIN
      // could find it taken only at the first insert.
      db.exec('BEGIN IMMEDIATE')
    } catch (err) {
      if (isBusy(err)) {
        this.#waitForLock(err)
      } else {
        this.#backoff = undefined
        this.#fail(batch.splice(0), err)
      }
      return
    }
    this.#pending = []
    this.#backoff = undefined
    const began = performance.now()
    let results: IdempotentCreate[]
    try {
      results = batch.map(({ pet, claim }) => this.#insertOne(pet, claim))
      db.exec('COMMIT')
    } catch (err) {
      if (db.isTransaction) db.exec('ROLLBACK')
      this.#fail(batch, err)
      return
    }
    const ended = performance.now()
    this.#attempts.committed()
    // Replays in the batch (a key already recorded) made no pet.
    const createdCount = results.filter((result) => result.created !== undefined).length
    this.observer.committed(createdCount, (ended - began) / 1000)
    this.commitTracer?.committed(
      batch.map((create) => create.traced),
      began,
      ended,
    )
    batch.forEach(({ resolve }, i) => {
      resolve(results[i] as IdempotentCreate)
    })
  }

  /**
   * One create inside the batch's transaction. D14: the pet goes in, then its record, which
   * goes in only where no live record holds the key (an expired one is replaced). The write lock
   * is held, so no other process can insert the key meanwhile, and an earlier create of this
   * same batch with the key has inserted its record already: the later one finds it taken and,
   * once the batch commits, replays it. Two creates with one key never both insert. The common
   * case, a new key, is two statements; a held key also takes back its pet (never seen outside
   * this transaction; AUTOINCREMENT skips its id) and reads the record to replay.
   */
  #insertOne(pet: NewPet, claim: IdempotencyClaim | undefined): IdempotentCreate {
    // run() and lastInsertRowid, not INSERT … RETURNING with get(): a statement left open
    // by get() stops SQLite from checkpointing and the -wal file grows without bound.
    const { lastInsertRowid } = this.#insert().run(pet.name, pet.categoryId, pet.status ?? null)
    // As a row would come back: the schema's keys in its order (routes/pets-json.ts).
    const created = toPet([Number(lastInsertRowid), pet.name, pet.categoryId, pet.status ?? null])
    if (claim === undefined) return { created }
    const { changes } = this.#claimRecord().run(...claimRecordValues(claim, created.id))
    if (Number(changes) === 1) return { created }
    this.#deletePet().run(created.id)
    const row = this.#findRecord().get(claim.apiKeyId, claim.key)
    if (row === undefined) throw new Error('the record that held the idempotency key is gone')
    return { found: toRecord(row) }
  }

  /** Every create queued now has settled: waits out the tries already scheduled. */
  async drain(): Promise<void> {
    this.flush()
    while (this.#pending.length > 0) await sleep(BUSY_TIMEOUT_MS)
  }

  #waitForLock(busy: unknown): void {
    const now = Date.now()
    // Deadlines follow queue order: every create waits lockTimeoutMs from when it was queued.
    const stillWaiting = this.#pending.findIndex((create) => create.deadline > now)
    const gaveUp = this.#pending.splice(
      0,
      stillWaiting === -1 ? this.#pending.length : stillWaiting,
    )
    if (gaveUp.length > 0) this.#fail(gaveUp, lockedError(busy))
    const next = this.#pending[0]
    if (next === undefined) {
      this.#backoff = undefined
      return
    }
    this.#backoff ??= new Backoff()
    const pause = Math.min(this.#backoff.next(), next.deadline - now)
    this.#retry = setTimeout(() => this.flush(), pause)
  }

  #fail(batch: PendingCreate[], err: unknown): void {
    const failure = this.#attempts.failed(err, batch.length)
    for (const { reject } of batch) reject(failure)
  }

  get(id: number): MaybePromise<Pet | undefined> {
    const row = this.#attempts.read(() => this.#reads.get(id))
    return row instanceof Promise ? row.then(petOrUndefined) : petOrUndefined(row)
  }

  list({ limit, status, afterId }: ListPetsQuery): MaybePromise<PetPage> {
    const rows = this.#attempts.read(() => this.#reads.page(limit + 1, status, afterId))
    const page = (found: PetRow[]) => pageOf(found, limit, toPet)
    return rows instanceof Promise ? rows.then(page) : page(rows)
  }
}
