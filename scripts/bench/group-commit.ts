// The durable create of the references that write (same-bytes.ts, fastify-floor.ts): the
// service's SQLite file opened as src/store/sqlite/store.ts opens it (WAL, synchronous=FULL, so a
// COMMIT returns once the log is fsync'd), and its group commit at its simplest: every create
// arriving in one event-loop turn joins one BEGIN IMMEDIATE … COMMIT, and each caller hears of
// its pet only after that COMMIT. No retries on timers, no outage reports, no idempotency
// records: a failure fails the whole batch, which fails the benchmark run (non-2xx).
import { DatabaseSync, type StatementSync } from 'node:sqlite'
import type { NewPet, Pet, PetStatus } from '../../src/contract/schemas.ts'

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

const STATUSES: readonly (PetStatus | undefined)[] = ['available', 'pending', 'sold', undefined]

/** The NewPet in a parsed body, or undefined: the fields' types, no more (a reference's check). */
export function newPetOf(value: unknown): NewPet | undefined {
  if (typeof value !== 'object' || value === null) return undefined
  const { name, categoryId, status } = value as Record<string, unknown>
  if (typeof name !== 'string' || name === '' || !Number.isSafeInteger(categoryId)) return undefined
  if (!STATUSES.includes(status as PetStatus | undefined)) return undefined
  const pet: NewPet = { name, categoryId: categoryId as number }
  if (status !== undefined) pet.status = status as PetStatus
  return pet
}

/** The contract's Pet, its fields in the schema's order (the service's 201 body). */
export function createdPet(id: number, pet: NewPet): Pet {
  const created: Pet = { id, name: pet.name, categoryId: pet.categoryId }
  if (pet.status !== undefined) created.status = pet.status
  return created
}

type Done = (err: unknown, pet?: Pet) => void

export class GroupCommit {
  readonly #db: DatabaseSync
  readonly #insert: StatementSync
  #pending: { pet: NewPet; done: Done }[] = []

  constructor(db: DatabaseSync) {
    this.#db = db
    // The service's INSERT (src/store/sqlite/pets.ts), with run() and lastInsertRowid as it does.
    this.#insert = db.prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?)')
  }

  /** Queues a create; `done` is called once the batch holding it has committed (or failed). */
  create(pet: NewPet, done: Done): void {
    this.#pending.push({ pet, done })
    // The first create of a turn schedules the commit; the rest of the turn joins it.
    if (this.#pending.length === 1) setImmediate(() => this.#flush())
  }

  #flush(): void {
    const batch = this.#pending
    this.#pending = []
    const db = this.#db
    let created: Pet[]
    try {
      db.exec('BEGIN IMMEDIATE')
      created = batch.map(({ pet }) => {
        const { lastInsertRowid } = this.#insert.run(pet.name, pet.categoryId, pet.status ?? null)
        return createdPet(Number(lastInsertRowid), pet)
      })
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
