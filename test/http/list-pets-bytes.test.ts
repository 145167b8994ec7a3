// listPets answers the exact bytes of JSON.stringify of its pets, in the schema's key order
// (id, name, categoryId, status), which holds only while the stores make every Pet with exactly
// those keys in that order (routes/pets-json.ts): random valid names (quotes, backslashes, U+2028,
// astral characters, lone-surrogate-free) must come back escaped as JSON.stringify escapes them
// (RFC 8259 §7). Black-box over HTTP.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import fc from 'fast-check'
import { createPet, startServer, type TestServer } from '../helpers/server.ts'
import { nextLink, type Pet, STATUSES } from './support.ts'

/** Names the interface accepts: 1–200 code points, not all white space, no control character. */
const validName = fc
  .string({ unit: 'grapheme', minLength: 1, maxLength: 40 })
  .map((name) => `${name}"\\\u2028`.slice(0, 40 + (name.length % 4)))
  .filter(
    (name) =>
      [...name].length <= 200 && name.trim() !== '' && name.isWellFormed() && !/\p{Cc}/u.test(name),
  )

const newPet = fc.record(
  {
    name: validName,
    categoryId: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
    status: fc.constantFrom(...STATUSES),
  },
  { requiredKeys: ['name', 'categoryId'] },
)

describe('listPets: the bytes of a page', () => {
  let server: TestServer
  before(async () => {
    server = await startServer()
  })
  after(() => server.close())

  test('are JSON.stringify of the pets, in id order and the schema’s key order', async () => {
    // Every pet this test made, in creation (id) order; the server starts empty.
    const all: Pet[] = []
    await fc.assert(
      fc.asyncProperty(fc.array(newPet, { minLength: 1, maxLength: 5 }), async (pets) => {
        for (const pet of pets) {
          const response = await createPet(server, pet)
          assert.equal(response.status, 201, await response.clone().text())
          const { id } = (await response.json()) as Pet
          all.push({ id, ...pet })
        }
        let url: string | undefined = '/v1/pets?limit=100'
        for (let at = 0; url !== undefined; at += 100) {
          const page = await server.request(url)
          assert.equal(page.status, 200)
          assert.equal(page.headers.get('content-type'), 'application/json; charset=utf-8')
          assert.equal(await page.text(), JSON.stringify(all.slice(at, at + 100)))
          url = nextLink(page)
        }
      }),
      { numRuns: 40 },
    )
  })
})
