// getPet (GET /v1/pets/{petId}), as the interface and D7 define it: the pet, 404, petId validation,
// the deprecation headers on every response, and 410 after the sunset (with an injected clock).
import assert from 'node:assert/strict'
import { after, afterEach, before, describe, test } from 'node:test'
import { createPet, errorOf, ManualClock, startServer, type TestServer } from '../helpers/server.ts'
import { listAll, MAX_ID, type Pet, parseLinks } from './support.ts'

const SUNSET = new Date('2030-12-05T00:00:00Z')
const SUNSET_HEADER = 'Thu, 05 Dec 2030 00:00:00 GMT'
/** Any instant well before the sunset; tests do not depend on the machine's clock. */
const BEFORE_SUNSET = new Date('2027-06-01T12:00:00Z')

/** Asserts the D7 deprecation headers (RFC 9745, RFC 8594, RFC 8288) on a getPet response. */
function assertDeprecationHeaders(response: Response): void {
  const deprecation = response.headers.get('deprecation')
  assert.ok(deprecation, 'Deprecation header present')
  const match = /^@(-?\d+)$/.exec(deprecation)
  assert.ok(match, `Deprecation is an RFC 9745 structured date @<seconds>, got ${deprecation}`)
  const deprecatedAt = Number(match[1])
  assert.ok(Number.isSafeInteger(deprecatedAt), 'an integer number of seconds')
  assert.ok(deprecatedAt > 0)
  assert.ok(deprecatedAt <= SUNSET.getTime() / 1000, 'deprecated no later than the sunset')

  const sunset = response.headers.get('sunset')
  assert.equal(sunset, SUNSET_HEADER)
  assert.equal(Date.parse(sunset ?? ''), SUNSET.getTime())

  const links = parseLinks(response.headers.get('link'))
  const byRel = (rel: string) => links.filter((link) => link.params.rel === rel)
  assert.equal(byRel('deprecation').length, 1, 'one rel="deprecation" link')
  assert.ok(byRel('deprecation')[0]?.target, 'rel="deprecation" has a target')
  assert.equal(byRel('sunset').length, 1, 'one rel="sunset" link')
  assert.ok(byRel('sunset')[0]?.target, 'rel="sunset" has a target')
  const successor = byRel('successor-version')
  assert.equal(successor.length, 1, 'one rel="successor-version" link')
  assert.equal(successor[0]?.target, '/v1/pets')
}

describe('getPet (GET /v1/pets/{petId})', () => {
  const clock = new ManualClock(BEFORE_SUNSET)
  let server: TestServer
  let rex: Pet
  let nameless: Pet

  before(async () => {
    server = await startServer({ clock })
    const a = await createPet(server, { name: 'Rex', categoryId: 2, status: 'sold' })
    assert.equal(a.status, 201)
    rex = (await a.json()) as Pet
    const b = await createPet(server, { name: 'Nameless status', categoryId: 3 })
    assert.equal(b.status, 201)
    nameless = (await b.json()) as Pet
  })
  afterEach(() => clock.set(BEFORE_SUNSET))
  after(() => server.close())

  describe('before the sunset', () => {
    test('200 with the pet', async () => {
      const response = await server.request(`/v1/pets/${rex.id}`)
      assert.equal(response.status, 200)
      assert.match(response.headers.get('content-type') ?? '', /^application\/json/)
      assert.deepEqual(await response.json(), {
        id: rex.id,
        name: 'Rex',
        categoryId: 2,
        status: 'sold',
      })
    })

    test('200 with a pet that has no status: status stays omitted', async () => {
      const response = await server.request(`/v1/pets/${nameless.id}`)
      assert.equal(response.status, 200)
      const body = (await response.json()) as Pet
      assert.deepEqual(body, nameless)
      assert.equal('status' in body, false)
    })

    test('the pet is the one listPets shows', async () => {
      const listed = await listAll(server)
      for (const pet of listed) {
        const response = await server.request(`/v1/pets/${pet.id}`)
        assert.equal(response.status, 200)
        assert.deepEqual(await response.json(), pet)
      }
    })

    for (const id of ['999999', String(MAX_ID)]) {
      test(`unknown id ${id} → 404 not_found`, async () => {
        const response = await server.request(`/v1/pets/${id}`)
        assert.equal(response.status, 404)
        const error = await errorOf(response)
        assert.equal(error.code, 'not_found')
        assert.ok(error.message.includes(id), error.message)
        assertDeprecationHeaders(response)
      })
    }

    // Only canonical decimal integers 1 … 2^53 − 1 (src/http/validation.ts): no sign, no
    // leading zero, no fraction, exponent, hex or white space.
    const invalidIds: [label: string, path: string][] = [
      ['0', '0'],
      ['-1', '-1'],
      ['abc', 'abc'],
      ['1.5', '1.5'],
      ['1.0', '1.0'],
      ['01 (leading zero)', '01'],
      ['+1', '%2B1'],
      ['1e0', '1e0'],
      ['0x10', '0x10'],
      ['" 1" (encoded space)', '%201'],
      ['"1 " (encoded space)', '1%20'],
      ['2^53 (9007199254740992)', '9007199254740992'],
      ['2^53 + 1 (9007199254740993)', '9007199254740993'],
      ['a 20-digit number', '12345678901234567890'],
      ['Infinity', 'Infinity'],
      ['NaN', 'NaN'],
      ['full-width digit one', encodeURIComponent('１')],
      ['an encoded slash', '1%2F2'],
    ]
    for (const [label, path] of invalidIds) {
      test(`petId ${label} → 400 naming petId`, async () => {
        const response = await server.request(`/v1/pets/${path}`)
        assert.equal(response.status, 400)
        const error = await errorOf(response)
        assert.equal(error.code, 'invalid_request')
        assert.match(error.message, /\bpetId\b/)
        assertDeprecationHeaders(response)
      })
    }

    for (const [path, sent] of [
      ['01', '01'],
      ['%2B1', '+1'],
      ['1e0', '1e0'],
      ['0x10', '0x10'],
      ['%201', ' 1'],
      ['0', '0'],
      ['9007199254740993', '9007199254740993'],
    ]) {
      test(`petId ${JSON.stringify(sent)}: the message states the rule and quotes what came`, async () => {
        const response = await server.request(`/v1/pets/${path}`)
        assert.equal(response.status, 400)
        assert.equal(
          (await errorOf(response)).message,
          `path parameter petId must be an integer from 1 to ${MAX_ID}, written in plain digits with no leading zero (got ${JSON.stringify(sent)})`,
        )
      })
    }

    test('a petId above 2^53 − 1 states the supported range', async () => {
      const response = await server.request('/v1/pets/9007199254740993')
      assert.equal(response.status, 400)
      const error = await errorOf(response)
      assert.ok(error.message.includes(String(MAX_ID)), error.message)
    })

    test('a petId that is not a valid URL component → 400 Error body', async () => {
      for (const path of ['%', '%zz', '1%']) {
        const response = await server.request(`/v1/pets/${path}`)
        assert.equal(response.status, 400, path)
        assert.equal((await errorOf(response)).code, 'invalid_request')
      }
    })

    test('an overlong petId → 400 Error body', async () => {
      const response = await server.request(`/v1/pets/${'1'.repeat(500)}`)
      assert.equal(response.status, 400)
      assert.equal((await errorOf(response)).code, 'invalid_request')
    })

    test('200 carries the deprecation headers', async () => {
      const response = await server.request(`/v1/pets/${rex.id}`)
      assert.equal(response.status, 200)
      assertDeprecationHeaders(response)
    })

    test('401 without a key carries the deprecation headers and a Bearer challenge', async () => {
      const response = await fetch(`${server.url}/v1/pets/${rex.id}`)
      assert.equal(response.status, 401)
      assert.equal((await errorOf(response)).code, 'unauthorized')
      assert.match(response.headers.get('www-authenticate') ?? '', /^Bearer realm="petstore"/)
      assertDeprecationHeaders(response)
    })

    test('401 with a wrong key carries the deprecation headers', async () => {
      const response = await server.request(`/v1/pets/${rex.id}`, {
        headers: { authorization: 'Bearer wrong' },
      })
      assert.equal(response.status, 401)
      assert.match(response.headers.get('www-authenticate') ?? '', /error="invalid_token"/)
      assertDeprecationHeaders(response)
    })

    test('authentication comes before petId validation and lookup', async () => {
      for (const path of ['abc', '0', '999999', String(rex.id)]) {
        const response = await fetch(`${server.url}/v1/pets/${path}`)
        assert.equal(response.status, 401, path)
        assert.equal((await errorOf(response)).code, 'unauthorized')
      }
    })

    test('the other operations are not marked deprecated', async () => {
      const list = await server.request('/v1/pets')
      assert.equal(list.status, 200)
      const created = await createPet(server, { name: 'Other', categoryId: 1 })
      assert.equal(created.status, 201)
      for (const response of [list, created]) {
        assert.equal(response.headers.get('deprecation'), null)
        assert.equal(response.headers.get('sunset'), null)
      }
    })

    test('one millisecond before the sunset it still answers 200', async () => {
      clock.set(SUNSET.getTime() - 1)
      const response = await server.request(`/v1/pets/${rex.id}`)
      assert.equal(response.status, 200)
      assert.deepEqual(await response.json(), rex)
      assertDeprecationHeaders(response)
    })
  })

  describe('from the sunset on', () => {
    for (const [label, at] of [
      ['at the sunset instant', SUNSET.getTime()],
      ['one millisecond after', SUNSET.getTime() + 1],
      ['years later', Date.parse('2035-01-01T00:00:00Z')],
    ] as const) {
      test(`${label}: an existing pet → 410 gone, with the deprecation headers`, async () => {
        clock.set(at)
        const response = await server.request(`/v1/pets/${rex.id}`)
        assert.equal(response.status, 410)
        const error = await errorOf(response)
        assert.equal(error.code, 'gone')
        assert.equal(
          error.message,
          'GET /v1/pets/:petId was removed on Thu, 05 Dec 2030 00:00:00 GMT; use /v1/pets',
        )
        assertDeprecationHeaders(response)
      })
    }

    test('an unknown id → 410 gone, not 404', async () => {
      clock.set(SUNSET)
      const response = await server.request('/v1/pets/999999')
      assert.equal(response.status, 410)
      assert.equal((await errorOf(response)).code, 'gone')
      assertDeprecationHeaders(response)
    })

    test('an invalid petId → 410 gone as well', async () => {
      clock.set(SUNSET)
      const response = await server.request('/v1/pets/abc')
      assert.equal(response.status, 410)
      assert.equal((await errorOf(response)).code, 'gone')
    })

    test('without a key still 401: authentication comes first', async () => {
      clock.set(SUNSET)
      const response = await fetch(`${server.url}/v1/pets/${rex.id}`)
      assert.equal(response.status, 401)
      assert.equal((await errorOf(response)).code, 'unauthorized')
      assertDeprecationHeaders(response)
    })

    test('with a wrong key still 401', async () => {
      clock.set(SUNSET)
      const response = await server.request(`/v1/pets/${rex.id}`, {
        headers: { authorization: 'Bearer wrong' },
      })
      assert.equal(response.status, 401)
      assert.equal((await errorOf(response)).code, 'unauthorized')
    })

    test('the successor, listPets, keeps working and still has the pet', async () => {
      clock.set(SUNSET)
      const response = await server.request('/v1/pets?status=sold')
      assert.equal(response.status, 200)
      const pets = (await response.json()) as Pet[]
      assert.ok(pets.some((pet) => pet.id === rex.id && pet.name === 'Rex'))
    })

    test('moving the clock back before the sunset serves the pet again', async () => {
      clock.set(SUNSET)
      assert.equal((await server.request(`/v1/pets/${rex.id}`)).status, 410)
      clock.set(SUNSET.getTime() - 1)
      const response = await server.request(`/v1/pets/${rex.id}`)
      assert.equal(response.status, 200)
      assert.deepEqual(await response.json(), rex)
    })
  })
})
