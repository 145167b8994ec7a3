// createPet (POST /v1/pets), as the interface and D6 define it: the 201, every way a body can be
// invalid (and that nothing is stored then), unknown fields all named in one message, media type
// and size limits, exact round trips of names and int64 values, and concurrent creates.
// Black-box over HTTP against a listening server.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { createPet, errorOf, startServer, type TestServer } from '../helpers/server.ts'
import { codePoints, listAll, MAX_ID, type Pet, postRaw, STATUSES } from './support.ts'

/** Reads a 201 and checks what every created pet must satisfy; returns the pet. */
async function created(response: Response): Promise<Pet> {
  assert.equal(response.status, 201, `expected 201, got ${response.status}`)
  assert.match(response.headers.get('content-type') ?? '', /^application\/json/)
  const pet = (await response.json()) as Pet
  assert.ok(Number.isSafeInteger(pet.id) && pet.id > 0, `id ${pet.id}`)
  assert.equal(response.headers.get('location'), `/v1/pets/${pet.id}`)
  return pet
}

async function getPet(server: TestServer, id: number): Promise<Pet> {
  const response = await server.request(`/v1/pets/${id}`)
  assert.equal(response.status, 200)
  return (await response.json()) as Pet
}

const json = (value: unknown) => JSON.stringify(value)

describe('createPet (POST /v1/pets)', () => {
  let server: TestServer
  before(async () => {
    server = await startServer()
  })
  after(() => server.close())

  describe('201 Created', () => {
    test('returns the pet with its new id and Location: /v1/pets/{id}', async () => {
      const pet = await created(
        await createPet(server, { name: 'Rex', categoryId: 3, status: 'available' }),
      )
      assert.deepEqual(Object.keys(pet).sort(), ['categoryId', 'id', 'name', 'status'])
      assert.deepEqual(pet, { id: pet.id, name: 'Rex', categoryId: 3, status: 'available' })
      assert.deepEqual(await getPet(server, pet.id), pet)
      const listed = (await listAll(server)).find((p) => p.id === pet.id)
      assert.deepEqual(listed, pet)
    })

    test('the Location header leads to the same pet', async () => {
      const response = await createPet(server, { name: 'Loc', categoryId: 1 })
      const pet = await created(response)
      const location = response.headers.get('location') ?? ''
      const fetched = await server.request(location)
      assert.equal(fetched.status, 200)
      assert.deepEqual(await fetched.json(), pet)
    })

    for (const status of STATUSES) {
      test(`status ${status} is accepted and kept`, async () => {
        const pet = await created(
          await createPet(server, { name: `s-${status}`, categoryId: 2, status }),
        )
        assert.equal(pet.status, status)
        assert.equal((await getPet(server, pet.id)).status, status)
      })
    }

    test('an omitted status stays omitted: in the 201, in a later GET and in the list', async () => {
      const response = await createPet(server, { name: 'No status', categoryId: 4 })
      const pet = await created(response)
      assert.deepEqual(Object.keys(pet).sort(), ['categoryId', 'id', 'name'])
      assert.equal('status' in pet, false)
      const fetched = await getPet(server, pet.id)
      assert.equal('status' in fetched, false)
      assert.deepEqual(fetched, pet)
      const listed = (await listAll(server)).find((p) => p.id === pet.id)
      assert.ok(listed)
      assert.equal('status' in listed, false)
      for (const status of STATUSES) {
        assert.ok(!(await listAll(server, status)).some((p) => p.id === pet.id))
      }
    })

    test('ids are assigned fresh and ascend', async () => {
      const a = await created(await createPet(server, { name: 'a', categoryId: 1 }))
      const b = await created(await createPet(server, { name: 'a', categoryId: 1 }))
      assert.ok(b.id > a.id, 'the same body twice makes two pets')
    })

    test('categoryId 1 and 2^53 − 1 are accepted; 2^53 − 1 round-trips exactly', async () => {
      await created(await createPet(server, { name: 'min', categoryId: 1 }))
      const response = await postRaw(server, `{"name":"max","categoryId":${MAX_ID}}`)
      assert.equal(response.status, 201)
      const text = await response.text()
      assert.ok(text.includes(`"categoryId":${MAX_ID}`), text)
      const pet = JSON.parse(text) as Pet
      assert.equal(pet.categoryId, MAX_ID)
      const fetched = await server.request(`/v1/pets/${pet.id}`)
      assert.ok((await fetched.text()).includes(`"categoryId":${MAX_ID}`))
    })

    test('Content-Type application/json with a charset parameter is accepted', async () => {
      await created(
        await postRaw(
          server,
          json({ name: 'cs', categoryId: 1 }),
          'application/json; charset=utf-8',
        ),
      )
    })

    test('a name of 200 code points is accepted, also as 200 emoji (400 UTF-16 units)', async () => {
      for (const name of ['a'.repeat(200), '🐶'.repeat(200)]) {
        assert.equal(codePoints(name), 200)
        const pet = await created(await createPet(server, { name, categoryId: 1 }))
        assert.equal(pet.name, name)
        assert.equal((await getPet(server, pet.id)).name, name)
      }
      assert.equal('🐶'.repeat(200).length, 400, 'the emoji name is 400 UTF-16 units')
    })

    test('white space around a name is kept as sent', async () => {
      for (const name of [' Rex', 'Rex ', '  R e x  ', 'Rex\u00a0']) {
        const pet = await created(await createPet(server, { name, categoryId: 1 }))
        assert.equal(pet.name, name)
        assert.equal((await getPet(server, pet.id)).name, name)
      }
    })
  })

  describe('names round-trip byte-exactly through create → get → list', () => {
    const names: [label: string, name: string][] = [
      ['emoji', '🐕 Rex 🐈'],
      ['a ZWJ sequence (family)', '👨‍👩‍👧‍👦'],
      ['a ZWJ sequence (service dog)', '🐕‍🦺'],
      ['a ZWJ sequence with variation selector (rainbow flag)', '🏳️‍🌈'],
      ['flags (regional indicators)', '🇯🇵🇺🇦🇧🇷'],
      ['skin tone modifier', '👍🏽'],
      ['CJK', '柴犬のポチ 小狗'],
      ['Korean', '강아지'],
      ['Arabic (RTL)', 'قطة صغيرة'],
      ['Hebrew (RTL)', 'כלב קטן'],
      ['mixed LTR and RTL', 'Rex رکس כלב 1'],
      ['double quotes', 'the "best" dog'],
      ['single quote', "O'Malley"],
      ['backslashes', 'back\\slash \\n \\u0000 \\\\'],
      ['an HTML script end tag', '</script><script>alert(1)</script>'],
      ['HTML entities and angle brackets', '&lt;b&gt; <b>bold</b> &amp;'],
      ['a combining accent (NFD, not normalised)', 'Cafe\u0301'],
      ['the precomposed accent (NFC)', 'Café'],
      ['astral-plane letters', '𝒫𝑒𝓉 𐐷'],
      ['a line separator (not a control character)', 'a\u2028b\u2029c'],
      ['a zero-width joiner and a BOM inside', 'a\u200db\ufeffc'],
      ['JSON-looking text', '{"id":1,"name":"x"}'],
      ['SQL-looking text', "'; DROP TABLE pets; --"],
    ]
    // On the suite's server: each test finds its pet by id (or by name, which no other test
    // uses), so a server of its own, a new database on PostgreSQL, bought nothing.

    for (const [label, name] of names) {
      test(label, async () => {
        const pet = await created(
          await createPet(server, { name, categoryId: 7, status: 'pending' }),
        )
        const bytes = Buffer.from(name, 'utf8')
        assert.ok(Buffer.from(pet.name, 'utf8').equals(bytes), 'the 201 body')
        const fetched = await getPet(server, pet.id)
        assert.ok(Buffer.from(fetched.name, 'utf8').equals(bytes), 'GET /v1/pets/{id}')
        const listed = (await listAll(server)).find((p) => p.id === pet.id)
        assert.ok(listed)
        assert.ok(Buffer.from(listed.name, 'utf8').equals(bytes), 'GET /v1/pets')
        const filtered = (await listAll(server, 'pending')).find((p) => p.id === pet.id)
        assert.deepEqual(filtered, pet)
      })
    }

    test('NFC and NFD spellings stay two different names', async () => {
      const list = await listAll(server)
      const nfd = list.find((p) => p.name === 'Cafe\u0301')
      const nfc = list.find((p) => p.name === 'Café')
      assert.ok(nfd && nfc && nfd.id !== nfc.id)
    })
  })

  describe('invalid bodies: 400 naming the field, and nothing stored', () => {
    // [label, raw JSON text, what the message must name]
    const cases: [label: string, raw: string, names: RegExp][] = [
      ['missing name', json({ categoryId: 1 }), /\bname\b/],
      ['missing categoryId', json({ name: 'Rex' }), /\bcategoryId\b/],
      ['an empty object', '{}', /\bname\b|\bcategoryId\b/],
      ['name a number', json({ name: 5, categoryId: 1 }), /\bname\b/],
      ['name null', json({ name: null, categoryId: 1 }), /\bname\b/],
      ['name an array', json({ name: ['Rex'], categoryId: 1 }), /\bname\b/],
      ['name an object', json({ name: { first: 'Rex' }, categoryId: 1 }), /\bname\b/],
      ['name empty', json({ name: '', categoryId: 1 }), /\bname\b/],
      ['name only spaces', json({ name: '   ', categoryId: 1 }), /\bname\b/],
      ['name only a tab', json({ name: '\t', categoryId: 1 }), /\bname\b/],
      [
        'name only non-ASCII white space',
        json({ name: '\u00a0\u3000', categoryId: 1 }),
        /\bname\b/,
      ],
      ['name of 201 ASCII letters', json({ name: 'a'.repeat(201), categoryId: 1 }), /\bname\b/],
      ['name of 201 emoji', json({ name: '🐶'.repeat(201), categoryId: 1 }), /\bname\b/],
      [
        'name of 29 family emoji (29 graphemes, 203 code points)',
        json({ name: '👨‍👩‍👧‍👦'.repeat(29), categoryId: 1 }),
        /\bname\b/,
      ],
      ['name with NUL', json({ name: 'Rex\u0000', categoryId: 1 }), /\bname\b/],
      ['name with a newline', json({ name: 'Rex\nMax', categoryId: 1 }), /\bname\b/],
      ['name with a carriage return', json({ name: 'Rex\r', categoryId: 1 }), /\bname\b/],
      ['name with a tab inside', json({ name: 'Rex\tMax', categoryId: 1 }), /\bname\b/],
      ['name with DEL', json({ name: 'Rex\u007f', categoryId: 1 }), /\bname\b/],
      ['name with a C1 control', json({ name: 'Rex\u0085', categoryId: 1 }), /\bname\b/],
      ['name with an escape (ESC)', json({ name: '\u001b[31mRex', categoryId: 1 }), /\bname\b/],
      ['name a lone high surrogate (\\ud800)', '{"name":"\\ud800","categoryId":1}', /\bname\b/],
      [
        'name with a lone low surrogate (\\udc00)',
        '{"name":"Rex\\udc00","categoryId":1}',
        /\bname\b/,
      ],
      ['name with reversed surrogates', '{"name":"\\udc00\\ud800","categoryId":1}', /\bname\b/],
      ['categoryId 0', json({ name: 'Rex', categoryId: 0 }), /\bcategoryId\b/],
      ['categoryId -1', json({ name: 'Rex', categoryId: -1 }), /\bcategoryId\b/],
      ['categoryId -0', '{"name":"Rex","categoryId":-0}', /\bcategoryId\b/],
      ['categoryId 1.5', json({ name: 'Rex', categoryId: 1.5 }), /\bcategoryId\b/],
      ['categoryId "5" (a string)', json({ name: 'Rex', categoryId: '5' }), /\bcategoryId\b/],
      ['categoryId true', json({ name: 'Rex', categoryId: true }), /\bcategoryId\b/],
      ['categoryId null', json({ name: 'Rex', categoryId: null }), /\bcategoryId\b/],
      ['categoryId an array', json({ name: 'Rex', categoryId: [1] }), /\bcategoryId\b/],
      ['categoryId an object', json({ name: 'Rex', categoryId: { id: 1 } }), /\bcategoryId\b/],
      ['categoryId 1.0', '{"name":"Rex","categoryId":1.0}', /\bcategoryId\b.*integer/],
      ['categoryId 1e0', '{"name":"Rex","categoryId":1e0}', /\bcategoryId\b.*integer/],
      ['categoryId 1E1', '{"name":"Rex","categoryId":1E1}', /\bcategoryId\b.*integer/],
      ['categoryId 5.000', '{"name":"Rex","categoryId":5.000}', /\bcategoryId\b.*integer/],
      [
        'categoryId 1.0000000000000001',
        '{"name":"Rex","categoryId":1.0000000000000001}',
        /\bcategoryId\b/,
      ],
      ['an unknown field', json({ name: 'Rex', categoryId: 1, nickname: 'R' }), /"nickname"/],
      ['an id field', json({ id: 5, name: 'Rex', categoryId: 1 }), /"id"/],
      ['a __proto__ field', '{"__proto__":{"id":1},"name":"Rex","categoryId":1}', /"__proto__"/],
      [
        'status not in the enum',
        json({ name: 'Rex', categoryId: 1, status: 'adopted' }),
        /\bstatus\b/,
      ],
      [
        'status in the wrong case',
        json({ name: 'Rex', categoryId: 1, status: 'Sold' }),
        /\bstatus\b/,
      ],
      ['status empty', json({ name: 'Rex', categoryId: 1, status: '' }), /\bstatus\b/],
      ['status null', json({ name: 'Rex', categoryId: 1, status: null }), /\bstatus\b/],
      ['status a number', json({ name: 'Rex', categoryId: 1, status: 1 }), /\bstatus\b/],
      ['a JSON array', '[]', /\bbody\b/],
      ['an array holding a pet', json([{ name: 'Rex', categoryId: 1 }]), /\bbody\b/],
      ['a JSON string', '"Rex"', /\bbody\b/],
      ['JSON null', 'null', /\bbody\b/],
      ['a JSON number', '5', /\bbody\b/],
      ['JSON true', 'true', /\bbody\b/],
      ['malformed JSON (unclosed)', '{"name":"Rex","categoryId":1', /JSON/],
      ['malformed JSON (trailing comma)', '{"name":"Rex","categoryId":1,}', /JSON/],
      ['malformed JSON (single quotes)', "{'name':'Rex','categoryId':1}", /JSON/],
      ['malformed JSON (NaN)', '{"name":"Rex","categoryId":NaN}', /JSON/],
      ['malformed JSON (two values)', '{"name":"Rex","categoryId":1}{}', /JSON/],
      ['an empty body with a JSON content type', '', /\bbody\b/],
      ['only white space with a JSON content type', '   ', /\bbody\b/],
    ]

    for (const [label, raw, names] of cases) {
      test(label, async () => {
        const before = await listAll(server)
        const response = await postRaw(server, raw)
        assert.equal(response.status, 400, `${label}: ${raw.slice(0, 80)}`)
        assert.equal(response.headers.get('location'), null)
        const error = await errorOf(response)
        assert.equal(error.code, 'invalid_request')
        assert.match(error.message, names)
        assert.deepEqual(await listAll(server), before, 'no pet was created')
      })
    }

    for (const raw of ['9007199254740992', '9007199254740993', '18446744073709551616']) {
      test(`categoryId ${raw} (above 2^53 − 1) → 400 stating the range, never stored rounded`, async () => {
        const before = await listAll(server)
        const response = await postRaw(server, `{"name":"Big","categoryId":${raw}}`)
        assert.equal(response.status, 400)
        const error = await errorOf(response)
        assert.equal(error.code, 'invalid_request')
        assert.match(error.message, /\bcategoryId\b/)
        assert.ok(
          error.message.includes(String(MAX_ID)),
          `the message states the range: ${error.message}`,
        )
        const now = await listAll(server)
        assert.deepEqual(now, before, 'no pet was created')
        assert.ok(!now.some((pet) => pet.categoryId > MAX_ID || pet.name === 'Big'))
      })
    }

    test('a name of 201 code points → 400 stating the 200 limit', async () => {
      const before = await listAll(server)
      const response = await createPet(server, { name: 'x'.repeat(201), categoryId: 1 })
      assert.equal(response.status, 400)
      const error = await errorOf(response)
      assert.match(error.message, /\bname\b/)
      assert.match(error.message, /\b200\b/)
      assert.deepEqual(await listAll(server), before, 'no pet was created')
    })
  })

  describe('unknown fields: one message names them all (D6)', () => {
    async function refusedFor(raw: string): Promise<string> {
      const before = await listAll(server)
      const response = await postRaw(server, raw)
      assert.equal(response.status, 400)
      const error = await errorOf(response)
      assert.equal(error.code, 'invalid_request')
      assert.deepEqual(await listAll(server), before, 'no pet was created')
      return error.message
    }

    test('"id" and "colour" → both named, in the order sent', async () => {
      assert.equal(
        await refusedFor('{"id":7,"name":"Rex","categoryId":1,"colour":"red"}'),
        'body has unknown fields: "id", "colour"; a NewPet has only name, categoryId and status',
      )
    })

    test('one unknown field is named alone', async () => {
      assert.equal(
        await refusedFor('{"name":"Rex","categoryId":1,"tag":"x"}'),
        'body has an unknown field "tag"; a NewPet has only name, categoryId and status',
      )
    })

    test('fifty unknown fields, around the known ones → all fifty named', async () => {
      const extra = Array.from({ length: 50 }, (_, i) => `f${i}`)
      const members = extra.map((key) => `"${key}":1`)
      members.splice(20, 0, '"name":"Rex"', '"categoryId":1')
      const message = await refusedFor(`{${members.join(',')}}`)
      assert.ok(message.includes(`: ${extra.map((key) => `"${key}"`).join(', ')};`), message)
    })
  })

  describe('media type and size', () => {
    const valid = json({ name: 'Rex', categoryId: 1 })

    for (const type of [
      'text/plain',
      'text/plain; charset=utf-8',
      'application/x-www-form-urlencoded',
      'application/xml',
      'application/json-patch+json',
      'multipart/form-data; boundary=x',
    ]) {
      test(`Content-Type ${type} → 415 unsupported_media_type`, async () => {
        const before = await listAll(server)
        const response = await postRaw(server, valid, type)
        assert.equal(response.status, 415)
        const error = await errorOf(response)
        assert.equal(error.code, 'unsupported_media_type')
        assert.deepEqual(await listAll(server), before, 'no pet was created')
      })
    }

    test('a body without any Content-Type → 415 unsupported_media_type', async () => {
      const before = await listAll(server)
      const response = await postRaw(server, new TextEncoder().encode(valid), null)
      assert.equal(response.status, 415)
      assert.equal((await errorOf(response)).code, 'unsupported_media_type')
      assert.deepEqual(await listAll(server), before)
    })

    test('a POST without any body → 400', async () => {
      const before = await listAll(server)
      const response = await server.request('/v1/pets', { method: 'POST' })
      assert.equal(response.status, 400)
      const error = await errorOf(response)
      assert.equal(error.code, 'invalid_request')
      assert.match(error.message, /\bbody\b/)
      assert.deepEqual(await listAll(server), before)
    })

    const head = '{"name":"Rex","categoryId":1,"padding":"'
    const bodyOfBytes = (size: number) => `${head}${'y'.repeat(size - head.length - 2)}"}`

    test('a body over 16384 bytes → 413 payload_too_large', async () => {
      for (const size of [16385, 20000, 100_000]) {
        const before = await listAll(server)
        const body = bodyOfBytes(size)
        assert.equal(Buffer.byteLength(body), size)
        const response = await postRaw(server, body)
        assert.equal(response.status, 413, `${size} bytes`)
        const error = await errorOf(response)
        assert.equal(error.code, 'payload_too_large')
        assert.match(error.message, /16384/)
        assert.deepEqual(await listAll(server), before)
      }
    })

    test('a body of exactly 16384 bytes is read (and judged on its content)', async () => {
      const body = bodyOfBytes(16384)
      assert.equal(Buffer.byteLength(body), 16384)
      const response = await postRaw(server, body)
      assert.equal(response.status, 400, 'not 413: the unknown field is what is wrong')
      assert.match((await errorOf(response)).message, /"padding"/)
    })

    test('a valid pet padded with white space to 16384 bytes is accepted', async () => {
      const pet = json({ name: 'Padded', categoryId: 1 })
      const body = pet + ' '.repeat(16384 - pet.length)
      assert.equal(Buffer.byteLength(body), 16384)
      const created201 = await created(await postRaw(server, body))
      assert.equal(created201.name, 'Padded')
    })
  })
})

describe('200 concurrent creates', () => {
  let server: TestServer
  before(async () => {
    server = await startServer()
  })
  after(() => server.close())

  test('get 200 distinct ids, and all 200 pets are listed', async () => {
    const bodies = Array.from({ length: 200 }, (_, i) => ({
      name: `concurrent ${i}`,
      categoryId: i + 1,
      ...(i % 3 === 0 ? {} : { status: STATUSES[i % 3] }),
    }))
    const responses = await Promise.all(bodies.map((body) => createPet(server, body)))
    const pets = await Promise.all(responses.map(created))
    pets.forEach((pet, i) => {
      assert.deepEqual({ ...pet, id: 0 }, { ...bodies[i], id: 0 }, 'each 201 answers its own body')
    })
    const ids = new Set(pets.map((pet) => pet.id))
    assert.equal(ids.size, 200, 'distinct ids')

    const listed = await listAll(server)
    assert.equal(listed.length, 200)
    const byId = new Map(pets.map((pet) => [pet.id, pet]))
    for (const pet of listed) assert.deepEqual(pet, byId.get(pet.id))
    const sorted = [...ids].sort((a, b) => a - b)
    assert.deepEqual(
      listed.map((pet) => pet.id),
      sorted,
      'listed once each, in ascending id order',
    )
  })
})
