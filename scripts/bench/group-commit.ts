// The durable create of the references that write (same-bytes.ts, fastify-floor.ts): the
// service's SQLite file opened as src/store/sqlite/store.ts opens it (WAL, synchronous=FULL, so a
// COMMIT returns once the log is fsync'd), and its group commit at its simplest: every create
// arriving in one event-loop turn joins one BEGIN IMMEDIATE … COMMIT, and each caller hears of
// its pet only after that COMMIT. The service's own statements (src/store/sqlite/pets.ts's
// PET_WRITES). A create with an Idempotency-Key does the service's database work for it (D14):
// the claim its route makes (routes/pets.ts: the body's fingerprint, the answer around the new
// id, now and the end of the default TTL), then in the batch's transaction the pet, then its
// record. No retries on timers, no outage reports, no replays: a failure, a key already held
// among them (the benchmark sends a new key each time), fails the whole batch, which fails the
// benchmark run (non-2xx).
import { DatabaseSync, type StatementSync } from 'node:sqlite'
import { IDEMPOTENCY_TTL_DEFAULT_SECONDS } from '../../src/contract/limits.ts'
import type { NewPet, Pet, PetStatus } from '../../src/contract/schemas.ts'
import { createClaim } from '../../src/http/routes/idempotency.ts'
import { claimRecordValues, PET_WRITES, toPet } from '../../src/store/sqlite/pets.ts'
import type { IdempotencyClaim } from '../../src/store/store.ts'

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

/** The record's owner: any text will do (no foreign key); the service's is the API key's id. */
const API_KEY_ID = 'same-bytes'
const TTL_MS = IDEMPOTENCY_TTL_DEFAULT_SECONDS * 1000

/** The claim the service's route makes for a create with `key` (routes/pets.ts). */
function claimOf(pet: NewPet, key: string): IdempotencyClaim {
  return createClaim(pet, { apiKeyId: API_KEY_ID, key, nowMs: Date.now(), ttlMs: TTL_MS })
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
