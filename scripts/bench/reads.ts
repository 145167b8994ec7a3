// The read operations of the references that read the database (db-limit.ts, same-bytes.ts,
// fastify-floor.ts), so that all three run the same SQL and write the same bytes: the service's
// own indexed queries (src/store/sqlite/pets.ts's PetQueries) as prepared statements returning arrays,
// JSON.stringify of the rows as the contract's objects, and the Link header when more follow.
// No validation beyond what keeps a query well-formed.
import type { DatabaseSync } from 'node:sqlite'
import { LIST_LIMIT } from '../../src/contract/limits.ts'
import type { Pet, PetStatus } from '../../src/contract/schemas.ts'
import { decodeCursor, nextPageLink } from '../../src/http/routes/cursor.ts'
import { PetQueries, toPet } from '../../src/store/sqlite/pets.ts'

/** The id after which the page starts (the service's own cursor decoder), or undefined. */
function afterIdOf(cursor: string | undefined): number | undefined {
  try {
    return cursor === undefined ? 0 : decodeCursor(cursor)
  } catch {
    return undefined
  }
}

/** listPets' 200 body, and its Link when more follow. */
export interface Page {
  body: string
  link: string | undefined
}

/** A listPets query as the store takes it. */
export interface PageQuery {
  limit: number
  status: PetStatus | undefined
  afterId: number
}

/** The query's parameters as the store takes them, or undefined when malformed (a 400). */
export function pageQuery(
  limitParam: string | undefined,
  statusParam: string | undefined,
  cursor: string | undefined,
): PageQuery | undefined {
  const limit = Number(limitParam ?? LIST_LIMIT.default)
  const afterId = afterIdOf(cursor)
  const limitOk =
    Number.isInteger(limit) && limit >= LIST_LIMIT.minimum && limit <= LIST_LIMIT.maximum
  if (afterId === undefined || !limitOk) return undefined
  return { limit, status: statusParam as PetStatus | undefined, afterId }
}

/** The page of `pets` (at most the limit), and its Link when `more` follow. */
export function pageOf(pets: Pet[], more: boolean, { limit, status }: PageQuery): Page {
  const last = pets.at(-1)
  return {
    body: JSON.stringify(pets),
    link: more && last !== undefined ? nextPageLink('/v1/pets', limit, status, last.id) : undefined,
  }
}

export interface PetReads {
  /** listPets' page; undefined for a malformed query (400). */
  list(
    limit: string | undefined,
    status: string | undefined,
    cursor: string | undefined,
  ): Page | undefined
  /** getPet's 200 body, or undefined when there is no such pet (404). */
  get(id: number): string | undefined
}

export function petReads(db: DatabaseSync): PetReads {
  // The statements of src/store/sqlite/pets.ts, the same class.
  const queries = new PetQueries(db)
  return {
    list(limitParam, statusParam, cursor) {
      const query = pageQuery(limitParam, statusParam, cursor)
      if (query === undefined) return undefined
      // One row more than asked tells whether another page follows, as the service does.
      const rows = queries.page(query.limit + 1, query.status, query.afterId)
      return pageOf(rows.slice(0, query.limit).map(toPet), rows.length > query.limit, query)
    },
    get(id) {
      const row = queries.get(id)
      return row === undefined ? undefined : JSON.stringify(toPet(row))
    },
  }
}
