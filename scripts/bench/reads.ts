// The read operations of the references that read the database (db-limit.ts, same-bytes.ts,
// fastify-floor.ts), so that all three run the same SQL and write the same bytes: the service's
// own indexed queries (the SQL of src/store/sqlite.ts) as prepared statements returning arrays,
// JSON.stringify of the rows as the contract's objects, and the Link header when more follow.
// No validation beyond what keeps a query well-formed.
import type { DatabaseSync, StatementSync } from 'node:sqlite'
import { LIST_LIMIT } from '../../src/contract/limits.ts'
import type { Pet, PetStatus } from '../../src/contract/schemas.ts'
import { decodeCursor, nextPageLink } from '../../src/routes/cursor.ts'

type PetRow = [id: number, name: string, categoryId: number, status: PetStatus | null]

/** The contract's Pet: its fields in its order, `status` left out when the row has none. */
function toPet(row: PetRow): Pet {
  const pet: Pet = { id: row[0], name: row[1], categoryId: row[2] }
  if (row[3] !== null) pet.status = row[3]
  return pet
}

/** The id after which the page starts (the service's own cursor decoder), or undefined. */
function afterIdOf(cursor: string | undefined): number | undefined {
  try {
    return cursor === undefined ? 0 : decodeCursor(cursor)
  } catch {
    return undefined
  }
}

export interface PetReads {
  /** listPets' 200 body and Link (when more follow); undefined for a malformed query (400). */
  list(
    limit: string | undefined,
    status: string | undefined,
    cursor: string | undefined,
  ): { body: string; link: string | undefined } | undefined
  /** getPet's 200 body, or undefined when there is no such pet (404). */
  get(id: number): string | undefined
}

export function petReads(db: DatabaseSync): PetReads {
  const prepare = (sql: string): StatementSync => {
    const statement = db.prepare(sql)
    statement.setReturnArrays(true)
    return statement
  }
  // The statements of src/store/sqlite.ts (SqlitePetRepository), word for word.
  const PET_COLUMNS = 'id, name, category_id, status'
  const get = prepare(`SELECT ${PET_COLUMNS} FROM pets WHERE id = ?`)
  const list = prepare(`SELECT ${PET_COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ?`)
  const listByStatus = prepare(
    `SELECT ${PET_COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`,
  )
  return {
    list(limitParam, statusParam, cursor) {
      const limit = Number(limitParam ?? LIST_LIMIT.default)
      const status = statusParam as PetStatus | undefined
      const afterId = afterIdOf(cursor)
      const limitOk =
        Number.isInteger(limit) && limit >= LIST_LIMIT.minimum && limit <= LIST_LIMIT.maximum
      if (afterId === undefined || !limitOk) return undefined
      // One row more than asked tells whether another page follows, as the service does.
      const rows = (status === undefined
        ? list.all(afterId, limit + 1)
        : listByStatus.all(status, afterId, limit + 1)) as unknown as PetRow[]
      const pets = rows.slice(0, limit).map(toPet)
      const last = pets.at(-1)
      const more = rows.length > limit && last !== undefined
      return {
        body: JSON.stringify(pets),
        link: more ? nextPageLink('/v1/pets', limit, status, last.id) : undefined,
      }
    },
    get(id) {
      const row = get.get(id) as unknown as PetRow | undefined
      return row === undefined ? undefined : JSON.stringify(toPet(row))
    },
  }
}
