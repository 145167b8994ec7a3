// D5: how a pet and a page of pets become bytes: JSON.stringify of the store's objects. The
// bytes are what the response schemas (contract/schemas.ts, `Pet` and `Pets`) and
// fast-json-stringify would write, key for key, in the same order, because both stores make
// every Pet with exactly the schema's keys in its order (toPet in store/sqlite/pets.ts and
// store/postgres/pets.ts, petOf in store/sql-core.ts) and leave `status` out rather than null. test/http/list-pets-bytes.test.ts
// and get-pet.test.ts check the bytes.
//
// Not fast-json-stringify: it spends its time on a type check and an escape test per field,
// which a Pet, checked by its type, does not need. Not a writer by hand either: a string built
// piece by piece is a chain of pieces that V8 must allocate and then copy flat to send, where
// JSON.stringify writes the flat string at once (what each costs: docs/benchmarks.md).
import type { NewPet, Pet } from '../../contract/schemas.ts'
import type { AroundId } from '../../store/store.ts'

/** One pet as the schema writes it: `{"id":…,"name":…,"categoryId":…[,"status":…]}`. */
export function petJson(pet: Pet): string {
  return JSON.stringify(pet)
}

/** A page of pets, as the listPets 200 body. */
export function petsJson(pets: readonly Pet[]): string {
  return JSON.stringify(pets)
}

/**
 * A new pet's body as petJson will write it once the store has given it an id: the text before
 * and after the id, `id` being the schema's first key. For the idempotency record, which a store
 * may write in the same statement as the pet (D14).
 */
export function petJsonAroundId(pet: NewPet): AroundId {
  const { name, categoryId, status } = pet
  const rest = JSON.stringify(
    status === undefined ? { name, categoryId } : { name, categoryId, status },
  )
  return { before: '{"id":', after: `,${rest.slice(1)}` }
}
