// The pets and their Idempotency-Key records on PostgreSQL (D10, D14).
import type { NewPet, Pet, PetStatus } from '../../contract/schemas.ts'
import { pageOf, petOf } from '../sql-core.ts'
import {
  type IdempotencyClaim,
  IdempotencyKeyInUseError,
  type IdempotencyRecord,
  type IdempotentCreate,
  type ListPetsQuery,
  type PetPage,
  type PetRepository,
} from '../store.ts'
import type { Database, Statement } from './connection.ts'

/**
 * D14: how long a create waits for another transaction that holds the same Idempotency-Key
 * (the unique index makes it wait) before answering 409 `idempotency_key_in_use`. A create
 * commits in milliseconds; a holder this slow is stuck or cut off.
 */
const LOCK_TIMEOUT_MS = 2_000
/** SQLSTATE lock_not_available: lock_timeout ran out. */
const LOCK_NOT_AVAILABLE = '55P03'

export interface PetRow {
  id: number
  name: string
  categoryId: number
  status: PetStatus | null
}

const PET_COLUMNS = 'id, name, category_id AS "categoryId", status'

const PET_SQL = {
  insertPet: {
    name: 'pets_insert',
    text: `INSERT INTO pets (name, category_id, status) VALUES ($1, $2, $3) RETURNING ${PET_COLUMNS}`,
  },
  getPet: { name: 'pets_get', text: `SELECT ${PET_COLUMNS} FROM pets WHERE id = $1` },
  listPets: {
    name: 'pets_list',
    text: `SELECT ${PET_COLUMNS} FROM pets WHERE id > $1 ORDER BY id LIMIT $2`,
  },
  listPetsByStatus: {
    name: 'pets_list_status',
    text: `SELECT ${PET_COLUMNS} FROM pets WHERE status = $1 AND id > $2 ORDER BY id LIMIT $3`,
  },
  // D14: the record and its pet in one statement, so one round trip and no transaction to hold
  // open. The pet's id is drawn from its identity's sequence first, so that the record's text
  // can hold it. The record goes in unless a live one holds the key: on a key already held the
  // insert waits for the holder's transaction to end (the unique index), then updates the row
  // only if it has expired. The pet goes in only when the record did, so a held key writes
  // nothing and returns no row. The wait is bounded by this statement's own lock_timeout
  // (set_config(…, true) lasts to the end of the statement's transaction, here the statement
  // itself, with or without a transaction-mode pooler); it is set in the first step, before
  // the insert can wait.
  createKeyed: {
    name: 'pets_insert_keyed',
    text: `WITH new_pet AS (
        SELECT nextval(pg_get_serial_sequence('pets', 'id')) AS id,
          set_config('lock_timeout', '${LOCK_TIMEOUT_MS}', true)
      ),
      claimed AS (
        INSERT INTO idempotency_keys (api_key_id, key, fingerprint, status, body, location, created_at)
        SELECT $1, $2, $3, $4, $5::text || id || $6::text, $7::text || id || $8::text, $9
        FROM new_pet
        ON CONFLICT (api_key_id, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,
          status = EXCLUDED.status, body = EXCLUDED.body, location = EXCLUDED.location,
          created_at = EXCLUDED.created_at
        WHERE idempotency_keys.created_at <= $10
        RETURNING 1
      )
      INSERT INTO pets (id, name, category_id, status) OVERRIDING SYSTEM VALUE
      SELECT id, $11, $12, $13 FROM new_pet WHERE EXISTS (SELECT FROM claimed)
      RETURNING ${PET_COLUMNS}`,
  },
  findKey: {
    name: 'idempotency_find',
    text: `SELECT fingerprint, status, body, location, created_at AS "createdAt" FROM idempotency_keys
      WHERE api_key_id = $1 AND key = $2 AND created_at > $3`,
  },
  purgeKeys: {
    name: 'idempotency_purge',
    text: `DELETE FROM idempotency_keys WHERE ctid IN
      (SELECT ctid FROM idempotency_keys WHERE created_at <= $1 LIMIT $2)`,
  },
} satisfies Record<string, Statement>

/** The pet statements, for the benchmark's PostgreSQL reference, which runs the service's PET_SQL. */
export const PET_STATEMENTS = {
  insert: PET_SQL.insertPet,
  insertKeyed: PET_SQL.createKeyed,
  get: PET_SQL.getPet,
  list: PET_SQL.listPets,
  listByStatus: PET_SQL.listPetsByStatus,
} as const

/** PET_SQL.createKeyed's parameters, in its order (also for the benchmark's PostgreSQL reference). */
export function keyedCreateValues(pet: NewPet, claim: IdempotencyClaim): unknown[] {
  const { status, body, location } = claim.outcome
  return [
    claim.apiKeyId,
    claim.key,
    claim.fingerprint,
    status,
    body.before,
    body.after,
    location.before,
    location.after,
    claim.now,
    claim.expiredAt,
    pet.name,
    pet.categoryId,
    pet.status ?? null,
  ]
}

/** A row as the contract's Pet (sql-core.ts). */
export function toPet(row: PetRow): Pet {
  return petOf(row.id, row.name, row.categoryId, row.status)
}

/** D14: lock_timeout ran out while another request held the key: 409, not 503. */
function keyInUse(err: unknown): never {
  if ((err as { code?: unknown }).code === LOCK_NOT_AVAILABLE) {
    throw new IdempotencyKeyInUseError('the Idempotency-Key is held by a request in flight', {
      cause: err,
    })
  }
  throw err
}

export class PostgresPetRepository implements PetRepository {
  readonly #db: Database

  constructor(db: Database) {
    this.#db = db
  }

  async create(pet: NewPet): Promise<Pet> {
    // Each create is its own transaction (the INSERT autocommits), so a batch of one; the
    // server groups concurrent flushes itself. Timed with the wait for a pooled connection.
    const began = performance.now()
    const { rows } = await this.#db.query<PetRow>(PET_SQL.insertPet, [
      pet.name,
      pet.categoryId,
      pet.status ?? null,
    ])
    this.#db.observer.committed(1, (performance.now() - began) / 1000)
    return toPet(rows[0] as PetRow)
  }

  /**
   * D14: the pet and its record in one statement (PET_SQL.createKeyed). The primary key on
   * (api_key_id, key) decides between requests on any number of instances: a second claim waits
   * for the first's transaction and, once it has committed, inserts nothing, neither record nor
   * pet; it then reads the record to replay. No lock in this process is trusted for that.
   */
  async createIdempotent(pet: NewPet, claim: IdempotencyClaim): Promise<IdempotentCreate> {
    const began = performance.now()
    const { rows } = await this.#db
      .query<PetRow>(PET_SQL.createKeyed, keyedCreateValues(pet, claim))
      .catch(keyInUse)
    const [row] = rows
    if (row !== undefined) {
      this.#db.observer.committed(1, (performance.now() - began) / 1000)
      return { created: toPet(row) }
    }
    const found = await this.#findRecord(claim)
    // Purged between the two statements (it had just expired): the key is new again.
    if (found === undefined) return this.createIdempotent(pet, claim)
    return { found }
  }

  async #findRecord(claim: IdempotencyClaim): Promise<IdempotencyRecord | undefined> {
    const { rows } = await this.#db.query<IdempotencyRecord>(PET_SQL.findKey, [
      claim.apiKeyId,
      claim.key,
      claim.expiredAt,
    ])
    return rows[0]
  }

  async purgeIdempotencyRecords(expiredAt: Date, limit: number): Promise<number> {
    const { rowCount } = await this.#db.query(PET_SQL.purgeKeys, [expiredAt, limit])
    return rowCount
  }

  async get(id: number): Promise<Pet | undefined> {
    const { rows } = await this.#db.query<PetRow>(PET_SQL.getPet, [id])
    return rows[0] && toPet(rows[0])
  }

  async list({ limit, status, afterId }: ListPetsQuery): Promise<PetPage> {
    const { rows } =
      status === undefined
        ? await this.#db.query<PetRow>(PET_SQL.listPets, [afterId, limit + 1])
        : await this.#db.query<PetRow>(PET_SQL.listPetsByStatus, [status, afterId, limit + 1])
    return pageOf(rows, limit, toPet)
  }
}
