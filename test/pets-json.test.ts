// The idempotency record's body is written from text around the new pet's id (D14: PostgreSQL
// writes record and pet in one statement). It must be, byte for byte, the body petJson writes for
// the pet the store returns, whatever the name holds (quotes, backslashes, U+2028, astral
// characters) and whether or not a status was given.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import type { NewPet, Pet } from '../src/contract/schemas.ts'
import { petJson, petJsonAroundId } from '../src/http/routes/pets-json.ts'
import { withId } from '../src/store/store.ts'
import { STATUSES } from './http/support.ts'

const newPet = fc.record(
  {
    name: fc
      .string({ unit: 'grapheme', minLength: 1, maxLength: 40 })
      .map((s) => `${s}"\\\u2028😀`),
    categoryId: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
    status: fc.constantFrom(...STATUSES),
  },
  { requiredKeys: ['name', 'categoryId'] },
)

/** The Pet as the stores make it: the schema's keys in its order, no status when none. */
function stored(id: number, pet: NewPet): Pet {
  const made: Pet = { id, name: pet.name, categoryId: pet.categoryId }
  if (pet.status !== undefined) made.status = pet.status
  return made
}

test('the record body around the id is petJson of the stored pet, byte for byte', () => {
  fc.assert(
    fc.property(newPet, fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), (pet, id) => {
      assert.equal(withId(petJsonAroundId(pet), id), petJson(stored(id, pet)))
    }),
  )
})
