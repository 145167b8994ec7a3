// What both SQL engines share; they differ in dialect and driver, not in these: a Pet made from
// its columns, and a listPets page read one row long. (Their migrations share migrations.ts.)
import type { Pet, PetStatus } from '../contract/schemas.ts'
import type { PetPage } from './store.ts'

/** A Pet from its columns: the schema's keys in its order, `status` left out when null (D6). */
export function petOf(id: number, name: string, categoryId: number, status: PetStatus | null): Pet {
  const pet: Pet = { id, name, categoryId }
  if (status !== null) pet.status = status
  return pet
}

/**
 * A listPets page from up to `limit + 1` rows read in id order: the extra row, when it came,
 * only says that another page follows.
 */
export function pageOf<Row>(
  rows: readonly Row[],
  limit: number,
  toPet: (row: Row) => Pet,
): PetPage {
  return { pets: rows.slice(0, limit).map(toPet), hasMore: rows.length > limit }
}
