// listPets (GET /v1/pets), as the interface and D5 define it: limit, status filter, order, unknown
// parameters, and the Link: rel="next" cursor. Black-box over HTTP against a listening server.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { createPet, errorOf, startServer, type TestServer } from '../helpers/server.ts'
import {
  getPage,
  listAll,
  nextLink,
  type Pet,
  type PetStatus,
  parseLinks,
  STATUSES,
  walkPages,
} from './support.ts'

// 57 pets; the status of pet i is STATUS_CYCLE[i % 7]: 17 available, 24 pending, 8 sold and
// 8 without a status.
const SEEDED = 57
const STATUS_CYCLE: (PetStatus | undefined)[] = [
  'available',
  'pending',
  'sold',
  undefined,
  'pending',
  'available',
  'pending',
]

async function seed(server: TestServer, count: number): Promise<Pet[]> {
  const pets: Pet[] = []
  for (let i = 0; i < count; i++) {
    const status = STATUS_CYCLE[i % STATUS_CYCLE.length]
    const body = { name: `pet ${i}`, categoryId: (i % 5) + 1, ...(status ? { status } : {}) }
    const response = await createPet(server, body)
    assert.equal(response.status, 201)
    pets.push((await response.json()) as Pet)
  }
  return pets
}

function ids(pets: Pet[]): number[] {
  return pets.map((pet) => pet.id)
}

/** Asserts a 400 invalid_request whose message names `name`. */
async function assertInvalid(server: TestServer, path: string, name: string | RegExp) {
  const response = await server.request(path)
  assert.equal(response.status, 400, `GET ${path}`)
  const error = await errorOf(response)
  assert.equal(error.code, 'invalid_request')
  if (typeof name === 'string') assert.ok(error.message.includes(name), error.message)
  else assert.match(error.message, name)
  assert.equal(response.headers.get('link'), null, 'an error carries no Link: rel="next"')
  return error
}

describe('listPets on an empty store', () => {
  let server: TestServer
  before(async () => {
    server = await startServer()
  })
  after(() => server.close())

  test('answers 200 with an empty array and no Link header', async () => {
    const { pets, response } = await getPage(server, '/v1/pets')
    assert.deepEqual(pets, [])
    assert.equal(response.headers.get('link'), null)
  })

  test('with a status filter, also an empty array and no Link header', async () => {
    for (const status of STATUSES) {
      const { pets, next } = await getPage(server, `/v1/pets?status=${status}&limit=1`)
      assert.deepEqual(pets, [])
      assert.equal(next, undefined)
    }
  })
})

describe('listPets (GET /v1/pets)', () => {
  let server: TestServer
  let seeded: Pet[]

  before(async () => {
    server = await startServer()
    seeded = await seed(server, SEEDED)
    assert.equal(seeded.length, SEEDED)
  })
  after(() => server.close())

  describe('limit', () => {
    test('defaults to 20: the 20 lowest ids, and a Link that keeps limit=20', async () => {
      const { pets, next } = await getPage(server, '/v1/pets')
      assert.deepEqual(pets, seeded.slice(0, 20))
      assert.ok(next, 'more pets follow, so there is a next link')
      assert.equal(new URL(next, server.url).searchParams.get('limit'), '20')
    })

    test('limit=1 is accepted and returns only the pet with the lowest id', async () => {
      const { pets, next } = await getPage(server, '/v1/pets?limit=1')
      assert.deepEqual(pets, seeded.slice(0, 1))
      assert.ok(next)
    })

    test('limit=100 is accepted and returns every pet when fewer exist, with no Link', async () => {
      const { pets, next, response } = await getPage(server, '/v1/pets?limit=100')
      assert.deepEqual(pets, seeded)
      assert.equal(next, undefined)
      assert.equal(response.headers.get('link'), null)
    })

    test('a limit equal to the number of pets gives one page and no Link', async () => {
      const { pets, next } = await getPage(server, `/v1/pets?limit=${SEEDED}`)
      assert.deepEqual(pets, seeded)
      assert.equal(next, undefined)
    })

    test('a limit one below the number of pets gives a Link to a last page of one', async () => {
      const first = await getPage(server, `/v1/pets?limit=${SEEDED - 1}`)
      assert.deepEqual(first.pets, seeded.slice(0, SEEDED - 1))
      assert.ok(first.next)
      const last = await getPage(server, first.next)
      assert.deepEqual(last.pets, seeded.slice(SEEDED - 1))
      assert.equal(last.next, undefined)
    })

    const invalidLimits: [label: string, query: string][] = [
      ['0 (below the minimum)', 'limit=0'],
      ['101 (above the maximum)', 'limit=101'],
      ['1.5 (not an integer)', 'limit=1.5'],
      ['1.0 (an integer written with a fraction)', 'limit=1.0'],
      ['abc', 'limit=abc'],
      ['empty', 'limit='],
      ['given without a value', 'limit'],
      ['repeated (limit=5&limit=6)', 'limit=5&limit=6'],
      ['repeated with the same value', 'limit=5&limit=5'],
      ['-1', 'limit=-1'],
      ['0x10 (hexadecimal)', 'limit=0x10'],
      ['" 5" (leading space, URL-encoded)', 'limit=%205'],
      ['"5 " (trailing space, URL-encoded)', 'limit=5%20'],
      ['"+5" (URL-encoded plus sign)', 'limit=%2B5'],
      ['1e1 (exponent)', 'limit=1e1'],
      ['05 (leading zero)', 'limit=05'],
      ['2^53 + 1', 'limit=9007199254740993'],
      ['Arabic-Indic digit five', `limit=${encodeURIComponent('٥')}`],
    ]
    for (const [label, query] of invalidLimits) {
      test(`limit ${label} → 400 naming limit`, async () => {
        await assertInvalid(server, `/v1/pets?${query}`, /\blimit\b/)
      })
    }

    test('a repeated limit is refused as given more than once', async () => {
      const error = await assertInvalid(server, '/v1/pets?limit=5&limit=6', /\blimit\b/)
      assert.match(error.message, /once/)
    })

    // Not only "must be an integer": how to write one.
    const misspelled: [query: string, sent: string][] = [
      ['limit=05', '05'],
      ['limit=%2B5', '+5'],
      ['limit=1e1', '1e1'],
      ['limit=%205', ' 5'],
      ['limit=0x10', '0x10'],
      ['limit=1.0', '1.0'],
      ['limit=', ''],
      ['limit=0', '0'],
      ['limit=101', '101'],
      ['limit=9007199254740993', '9007199254740993'],
    ]
    for (const [query, sent] of misspelled) {
      test(`${query}: the message states the rule and quotes what came`, async () => {
        const error = await assertInvalid(server, `/v1/pets?${query}`, /\blimit\b/)
        assert.equal(
          error.message,
          `query parameter limit must be an integer from 1 to 100, written in plain digits with no leading zero (got ${JSON.stringify(sent)})`,
        )
      })
    }

    test('a long refused limit is quoted only in part', async () => {
      const error = await assertInvalid(server, `/v1/pets?limit=${'9'.repeat(500)}`, /\blimit\b/)
      assert.ok(error.message.length < 200, error.message)
      assert.match(error.message, /\(got "9{32}…"\)$/)
    })

    test('a limit out of range states the range it broke', async () => {
      const low = await assertInvalid(server, '/v1/pets?limit=0', /\blimit\b/)
      assert.match(low.message, /\b1\b/)
      const high = await assertInvalid(server, '/v1/pets?limit=101', /\blimit\b/)
      assert.match(high.message, /\b100\b/)
    })
  })

  describe('status filter', () => {
    for (const status of STATUSES) {
      test(`status=${status} returns exactly the pets with that status, in id order`, async () => {
        const { pets, next } = await getPage(server, `/v1/pets?status=${status}&limit=100`)
        const expected = seeded.filter((pet) => pet.status === status)
        assert.ok(expected.length > 0, 'the seed has pets with this status')
        assert.deepEqual(pets, expected)
        assert.ok(pets.every((pet) => pet.status === status))
        assert.equal(next, undefined)
      })
    }

    test('pets without a status appear unfiltered but under no status filter', async () => {
      const withoutStatus = seeded.filter((pet) => pet.status === undefined)
      assert.ok(withoutStatus.length > 0)
      const unfiltered = await listAll(server)
      for (const pet of withoutStatus) {
        assert.ok(!('status' in pet), 'status stays omitted')
        assert.ok(unfiltered.some((listed) => listed.id === pet.id))
      }
      for (const status of STATUSES) {
        const filtered = await listAll(server, status)
        assert.ok(!filtered.some((listed) => withoutStatus.some((pet) => pet.id === listed.id)))
      }
    })

    test('the status filter combines with limit', async () => {
      const { pets, next } = await getPage(server, '/v1/pets?limit=3&status=sold')
      assert.deepEqual(pets, seeded.filter((pet) => pet.status === 'sold').slice(0, 3))
      assert.ok(next)
    })

    const invalidStatuses: [label: string, query: string][] = [
      ['Available (wrong case)', 'status=Available'],
      ['AVAILABLE', 'status=AVAILABLE'],
      ['empty', 'status='],
      ['given without a value', 'status'],
      ['with a trailing space', 'status=available%20'],
      ['unknown value', 'status=adopted'],
      ['a comma-separated list', 'status=available,sold'],
      ['repeated', 'status=available&status=sold'],
    ]
    for (const [label, query] of invalidStatuses) {
      test(`status ${label} → 400 naming status`, async () => {
        await assertInvalid(server, `/v1/pets?${query}`, /\bstatus\b/)
      })
    }

    test('an invalid status names the allowed values', async () => {
      const error = await assertInvalid(server, '/v1/pets?status=Available', /\bstatus\b/)
      for (const status of STATUSES) assert.ok(error.message.includes(status), error.message)
    })
  })

  describe('unknown query parameters', () => {
    const unknown = [
      'foo',
      'offset',
      'page',
      'Limit',
      'sort',
      'status[]',
      '__proto__',
      'constructor',
    ]
    for (const name of unknown) {
      test(`${name}=1 → 400 naming ${name}`, async () => {
        await assertInvalid(server, `/v1/pets?${encodeURIComponent(name)}=1`, `"${name}"`)
      })
    }

    test('an unknown parameter is refused even beside valid ones', async () => {
      await assertInvalid(server, '/v1/pets?limit=5&status=sold&foo=bar', '"foo"')
    })

    test('several unknown parameters are all named in one message', async () => {
      await assertInvalid(server, '/v1/pets?foo=1&limit=5&page=2', 'parameters "foo", "page"')
    })
  })

  describe('order and body', () => {
    test('pets come in ascending id order, within and across pages', async () => {
      const pages = await walkPages(server, '/v1/pets?limit=7')
      const all = pages.flat()
      for (let i = 1; i < all.length; i++) {
        assert.ok((all[i] as Pet).id > (all[i - 1] as Pet).id, 'ids strictly ascend')
      }
      assert.deepEqual(ids(all), ids(seeded))
    })

    test('the body is a bare JSON array of Pet objects, with no pagination envelope', async () => {
      const response = await server.request('/v1/pets?limit=5')
      assert.equal(response.status, 200)
      assert.match(response.headers.get('content-type') ?? '', /^application\/json/)
      const text = await response.text()
      assert.ok(text.startsWith('['), 'the body is a JSON array')
      const body = JSON.parse(text) as unknown[]
      assert.equal(body.length, 5)
      for (const pet of body as Record<string, unknown>[]) {
        const keys = Object.keys(pet).sort()
        assert.ok(
          ['categoryId,id,name', 'categoryId,id,name,status'].includes(keys.join(',')),
          `Pet fields only, got ${keys}`,
        )
        assert.ok(Number.isSafeInteger(pet.id) && (pet.id as number) > 0)
        assert.equal(typeof pet.name, 'string')
        assert.ok(Number.isSafeInteger(pet.categoryId))
      }
    })
  })

  describe('Link: rel="next"', () => {
    test('is present when more pets follow, as a relative URL to /v1/pets', async () => {
      const response = await server.request('/v1/pets?limit=10')
      const links = parseLinks(response.headers.get('link'))
      assert.equal(links.length, 1)
      assert.equal(links[0]?.params.rel, 'next')
      const next = new URL(links[0]?.target ?? '', server.url)
      assert.equal(next.origin, server.url, 'the link points at this service')
      assert.equal(next.pathname, '/v1/pets')
      assert.equal(next.searchParams.get('limit'), '10')
      assert.equal(next.searchParams.has('status'), false)
      assert.ok(next.searchParams.get('cursor'), 'the link carries a cursor')
    })

    test('keeps limit and status in its URL', async () => {
      const { next } = await getPage(server, '/v1/pets?status=pending&limit=10')
      assert.ok(next)
      const url = new URL(next, server.url)
      assert.equal(url.pathname, '/v1/pets')
      assert.equal(url.searchParams.get('limit'), '10')
      assert.equal(url.searchParams.get('status'), 'pending')
      assert.ok(url.searchParams.get('cursor'))
      // …and so does the link of the page it leads to.
      const second = await getPage(server, next)
      assert.ok(second.next)
      const secondUrl = new URL(second.next, server.url)
      assert.equal(secondUrl.searchParams.get('limit'), '10')
      assert.equal(secondUrl.searchParams.get('status'), 'pending')
    })

    test('is absent on the last page', async () => {
      const pages = await walkPages(server, '/v1/pets?limit=10')
      assert.equal(pages.length, 6)
      assert.deepEqual(
        pages.map((page) => page.length),
        [10, 10, 10, 10, 10, 7],
      )
      // A last page reached through a link: its own response has no Link field at all.
      const { next: toLast } = await getPage(server, '/v1/pets?limit=50')
      assert.ok(toLast)
      const last = await server.request(toLast)
      assert.equal(last.status, 200)
      assert.equal(last.headers.get('link'), null)
      assert.deepEqual(ids((await last.json()) as Pet[]), ids(seeded.slice(50)))
    })

    test('when the matches are a multiple of the limit, the last full page has no Link', async () => {
      const sold = seeded.filter((pet) => pet.status === 'sold')
      assert.equal(sold.length, 8)
      const pages = await walkPages(server, '/v1/pets?status=sold&limit=4')
      assert.deepEqual(pages, [sold.slice(0, 4), sold.slice(4)])
    })

    test('walking status=pending with limit=10 returns every pending pet exactly once, and nothing else', async () => {
      const expected = seeded.filter((pet) => pet.status === 'pending')
      assert.equal(expected.length, 24)
      const pages = await walkPages(server, '/v1/pets?limit=10&status=pending')
      assert.deepEqual(
        pages.map((page) => page.length),
        [10, 10, 4],
      )
      const walked = pages.flat()
      assert.equal(new Set(ids(walked)).size, walked.length, 'no pet twice')
      assert.deepEqual(walked, expected)
    })

    for (const status of [...STATUSES, undefined]) {
      for (const limit of [1, 3, 10, 100]) {
        test(`walking ${status ? `status=${status}` : 'all pets'} with limit=${limit} visits each match once`, async () => {
          const expected = seeded.filter((pet) => status === undefined || pet.status === status)
          const query = new URLSearchParams({ limit: String(limit) })
          if (status) query.set('status', status)
          const pages = await walkPages(server, `/v1/pets?${query}`)
          assert.equal(pages.length, Math.max(1, Math.ceil(expected.length / limit)))
          for (const [i, page] of pages.entries()) {
            if (i < pages.length - 1)
              assert.equal(page.length, limit, 'only the last page is short')
            else assert.ok(page.length >= 1 && page.length <= limit)
          }
          assert.deepEqual(pages.flat(), expected)
        })
      }
    }

    test('the next link of a page without more results is not sent', async () => {
      const response = await server.request('/v1/pets?status=available&limit=100')
      assert.equal(response.status, 200)
      assert.equal(nextLink(response), undefined)
    })

    const base64url = (text: string) => Buffer.from(text).toString('base64url')
    const garbageCursors: [label: string, cursor: string][] = [
      ['random text', 'zzz'],
      ['not base64', '!!!***'],
      ['empty', ''],
      ['base64 of non-JSON', base64url('hello')],
      ['base64 of JSON null', base64url('null')],
      ['a negative position', base64url('{"after":-1}')],
      ['a string position', base64url('{"after":"1"}')],
      ['a fractional position', base64url('{"after":1.5}')],
      ['a position beyond 2^53 − 1', base64url('{"after":9007199254740992}')],
      ['longer than any real cursor', 'A'.repeat(65)],
    ]
    for (const [label, cursor] of garbageCursors) {
      test(`a garbage cursor (${label}) → 400 naming cursor`, async () => {
        await assertInvalid(server, `/v1/pets?cursor=${encodeURIComponent(cursor)}`, /\bcursor\b/)
      })
    }

    test('a garbage cursor is refused also beside valid limit and status', async () => {
      await assertInvalid(server, '/v1/pets?limit=10&status=pending&cursor=zzz', /\bcursor\b/)
    })

    test('a repeated cursor → 400 naming cursor', async () => {
      const { next } = await getPage(server, '/v1/pets?limit=10')
      assert.ok(next)
      const cursor = new URL(next, server.url).searchParams.get('cursor') ?? ''
      await assertInvalid(
        server,
        `/v1/pets?limit=10&cursor=${cursor}&cursor=${cursor}`,
        /\bcursor\b/,
      )
    })
  })

  describe('authentication comes first', () => {
    test('no API key with an invalid limit → 401, not 400', async () => {
      const response = await fetch(`${server.url}/v1/pets?limit=0`)
      assert.equal(response.status, 401)
      assert.equal((await errorOf(response)).code, 'unauthorized')
    })

    test('a wrong API key with a garbage cursor → 401, not 400', async () => {
      const response = await server.request('/v1/pets?cursor=zzz', {
        headers: { authorization: 'Bearer not-a-key' },
      })
      assert.equal(response.status, 401)
      assert.equal((await errorOf(response)).code, 'unauthorized')
    })
  })
})

describe('walking listPets while pets are added', () => {
  let server: TestServer
  before(async () => {
    server = await startServer()
  })
  after(() => server.close())

  test('pets created mid-walk show up once, at the end, and nothing repeats', async () => {
    const first = await seed(server, 25)
    const page1 = await getPage(server, '/v1/pets?limit=10')
    assert.deepEqual(page1.pets, first.slice(0, 10))
    assert.ok(page1.next)
    const added: Pet[] = []
    for (let i = 0; i < 5; i++) {
      const response = await createPet(server, { name: `late ${i}`, categoryId: 9 })
      assert.equal(response.status, 201)
      added.push((await response.json()) as Pet)
    }
    const rest = (await walkPages(server, page1.next)).flat()
    assert.deepEqual([...page1.pets, ...rest], [...first, ...added])
  })
})
