// Same bytes on SQLite: what the service sends, from its SQLite file, by the shortest path. A raw
// node:http server (same-bytes-http.ts) running the service's own indexed queries (PetQueries of
// src/store/sqlite/pets.ts) as prepared statements returning arrays, JSON.stringify of the rows as
// the contract's objects, and the Link header when more follow. createPet is durable as the
// service's is: the file opened as src/store/sqlite/store.ts opens it (WAL, synchronous=FULL, so a
// COMMIT returns once the log is fsync'd), and its group commit at its simplest: every create of
// one event-loop turn in one BEGIN IMMEDIATE … COMMIT, each 201 sent after it, by the service's
// statements (PET_WRITES); with an Idempotency-Key, the service's database work for it (D14): the
// claim its route makes, then the pet and its record in that transaction. No retries, no replays:
// a failure (a key already held: the benchmark sends new ones) fails the batch, and so the run.
// fastify-floor.ts runs the same reads and the same group commit.
//
//   node scripts/bench/same-bytes.ts <sqlite file>   (PORT and BENCH_AUTHORIZATION, the whole
//   Authorization header expected, in the environment)
import { DatabaseSync, type StatementSync } from 'node:sqlite'
import type { NewPet, Pet } from '../../src/contract/schemas.ts'
import { claimRecordValues, PET_WRITES, PetQueries, toPet } from '../../src/store/sqlite/pets.ts'
import type { IdempotencyClaim } from '../../src/store/store.ts'
import { claimOf, type Page, pageOf, pageQuery, serveSameBytes } from './same-bytes-http.ts'

/** listPets' page (undefined for a malformed query: 400) and getPet's body (undefined: 404). */
export function petReads(db: DatabaseSync) {
  // The statements of src/store/sqlite/pets.ts, the same class.
  const queries = new PetQueries(db)
  return {
    list(limitParam?: string, statusParam?: string, cursor?: string): Page | undefined {
      const query = pageQuery(limitParam, statusParam, cursor)
      if (query === undefined) return undefined
      // One row more than asked tells whether another page follows, as the service does.
      const rows = queries.page(query.limit + 1, query.status, query.afterId)
      return pageOf(rows.slice(0, query.limit).map(toPet), rows.length > query.limit, query)
    },
    get(id: number): string | undefined {
      const row = queries.get(id)
      return row === undefined ? undefined : JSON.stringify(toPet(row))
    },
  }
}

/** Opens the file for reads and durable writes, as the service does. */
export function openDurable(path: string): DatabaseSync {
  const db = new DatabaseSync(path)
  db.exec('PRAGMA journal_mode = WAL')
  db.exec('PRAGMA synchronous = FULL')
  // Another process (the service, between rounds) may hold the write lock for a moment; a
  // reference may block its loop while it waits, nothing else being measured meanwhile.
  db.exec('PRAGMA busy_timeout = 5000')
  return db
}

type Done = (err: unknown, pet?: Pet) => void

export class GroupCommit {
  readonly #db: DatabaseSync
  readonly #insert: StatementSync
  readonly #claimRecord: StatementSync
  #pending: { pet: NewPet; claim: IdempotencyClaim | undefined; done: Done }[] = []

  constructor(db: DatabaseSync) {
    this.#db = db
    this.#insert = db.prepare(PET_WRITES.insert)
    this.#claimRecord = db.prepare(PET_WRITES.claimRecord)
  }

  /**
   * Queues a create, with its Idempotency-Key as sent (undefined without one); `done` is called
   * once the batch holding it has committed (or failed).
   */
  create(pet: NewPet, key: string | undefined, done: Done): void {
    const claim = key === undefined ? undefined : claimOf(pet, key)
    this.#pending.push({ pet, claim, done })
    // The first create of a turn schedules the commit; the rest of the turn joins it.
    if (this.#pending.length === 1) setImmediate(() => this.#flush())
  }

  /** The service's create in the batch's transaction (SqlitePetRepository's #insertOne). */
  #insertOne(pet: NewPet, claim: IdempotencyClaim | undefined): Pet {
    const { lastInsertRowid } = this.#insert.run(pet.name, pet.categoryId, pet.status ?? null)
    const created = toPet([Number(lastInsertRowid), pet.name, pet.categoryId, pet.status ?? null])
    if (claim === undefined) return created
    const { changes } = this.#claimRecord.run(...claimRecordValues(claim, created.id))
    if (Number(changes) !== 1) throw new Error(`the Idempotency-Key ${claim.key} is held`)
    return created
  }

  #flush(): void {
    const batch = this.#pending
    this.#pending = []
    const db = this.#db
    let created: Pet[]
    try {
      db.exec('BEGIN IMMEDIATE')
      created = batch.map(({ pet, claim }) => this.#insertOne(pet, claim))
      db.exec('COMMIT')
    } catch (err) {
      if (db.isTransaction) db.exec('ROLLBACK')
      for (const { done } of batch) done(err)
      return
    }
    batch.forEach(({ done }, i) => {
      done(undefined, created[i])
    })
  }
}

if (import.meta.main) {
  const db = openDurable(process.argv[2] ?? '')
  const reads = petReads(db)
  const commits = new GroupCommit(db)
  serveSameBytes({
    list: (limit, status, cursor, done) => done(undefined, reads.list(limit, status, cursor)),
    get: (id, done) => done(undefined, reads.get(id)),
    create: (pet, key, done) => commits.create(pet, key, done),
  })
}
