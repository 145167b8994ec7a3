// The read operations of the references that read the database (db-limit.ts, same-bytes.ts,
// fastify-floor.ts), so that all three run the same SQL and write the same bytes: the service's
// own indexed queries (src/store/sqlite.ts's PetQueries) as prepared statements returning arrays,
// JSON.stringify of the rows as the contract's objects, and the Link header when more follow.
// No validation beyond what keeps a query well-formed.
import type { DatabaseSync } from 'node:sqlite'
import { LIST_LIMIT } from '../../src/contract/limits.ts'
import type { PetStatus } from '../../src/contract/schemas.ts'
import { decodeCursor, nextPageLink } from '../../src/routes/cursor.ts'
import { PetQueries, toPet } from '../../src/store/sqlite.ts'

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
  // The statements of src/store/sqlite.ts, the same class.
  const queries = new PetQueries(db)
  return {
    list(limitParam, statusParam, cursor) {
      const limit = Number(limitParam ?? LIST_LIMIT.default)
      const status = statusParam as PetStatus | undefined
      const afterId = afterIdOf(cursor)
      const limitOk =
        Number.isInteger(limit) && limit >= LIST_LIMIT.minimum && limit <= LIST_LIMIT.maximum
      if (afterId === undefined || !limitOk) return undefined
      // One row more than asked tells whether another page follows, as the service does.
      const rows = queries.page(limit + 1, status, afterId)
      const pets = rows.slice(0, limit).map(toPet)
      const last = pets.at(-1)
      const more = rows.length > limit && last !== undefined
      return {
        body: JSON.stringify(pets),
        link: more ? nextPageLink('/v1/pets', limit, status, last.id) : undefined,
      }
    },
    get(id) {
      const row = queries.get(id)
      return row === undefined ? undefined : JSON.stringify(toPet(row))
    },
  }
}
