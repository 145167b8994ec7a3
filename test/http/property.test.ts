// Property-based black-box tests: random invalid bodies (bad JSON, bad UTF-8, repeated keys),
// query strings, petIds and Authorization headers always get a 4xx Error body {code, message,
// status} whose status is the HTTP status (D4), and never change the data; random valid bodies,
// astral characters included, are stored byte for byte. Generators filter out everything valid,
// with an oracle written from the interface, D5–D7 and D16 (docs/decisions.md) and RFC 8259, not
// from the service's code.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import fc from 'fast-check'
import { createPet, errorOf, startServer, type TestServer } from '../helpers/server.ts'
import { listAll, MAX_ID, type Pet, postRaw, STATUSES } from './support.ts'

const NUM_RUNS = 200
const MAX_BIG = BigInt(MAX_ID)
const KNOWN_PARAMS = new Set(['limit', 'status', 'cursor'])

// ---- The oracle: what a valid request looks like (the interface; D5, D6, D7) ----

function isValidName(name: unknown): boolean {
  if (typeof name !== 'string') return false
  const length = [...name].length
  return (
    length >= 1 &&
    length <= 200 &&
    name.trim() !== '' &&
    name.isWellFormed() &&
    !/\p{Cc}/u.test(name)
  )
}

function isValidNewPet(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  const keys = Object.keys(value)
  if (!keys.every((key) => key === 'name' || key === 'categoryId' || key === 'status')) return false
  const { name, categoryId, status } = value as Record<string, unknown>
  return (
    isValidName(name) &&
    typeof categoryId === 'number' &&
    Number.isSafeInteger(categoryId) &&
    categoryId >= 1 &&
    (!keys.includes('status') || (STATUSES as readonly unknown[]).includes(status))
  )
}

/**
 * The number tokens of a JSON text, as written: everything outside strings that starts like a
 * number (RFC 8259 §6). Strings are skipped with their escapes.
 */
function numberTokens(text: string): string[] {
  const tokens: string[] = []
  const number = /-?[0-9][0-9.eE+-]*/y
  for (let at = 0; at < text.length; ) {
    const char = text[at]
    if (char === '"') {
      at++
      while (at < text.length && text[at] !== '"') at += text[at] === '\\' ? 2 : 1
      at++
    } else if (char === '-' || (char !== undefined && char >= '0' && char <= '9')) {
      number.lastIndex = at
      const token = number.exec(text)?.[0] ?? char
      tokens.push(token)
      at += token.length
    } else {
      at++
    }
  }
  return tokens
}

/**
 * Could this JSON text be accepted? A valid NewPet, whose one number, `categoryId`, is written
 * as plain digits (D6: `1.0`, `1e0` and `01` are refused though JSON.parse reads them as 1).
 */
function mayBeValidBodyText(text: string): boolean {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return false
  }
  return isValidNewPet(value) && numberTokens(text).every((token) => /^[1-9][0-9]*$/.test(token))
}

/** A canonical decimal integer from `min` to 2^53 − 1. */
function isCanonicalInteger(text: string, min: bigint): boolean {
  return /^(0|[1-9][0-9]*)$/.test(text) && BigInt(text) >= min && BigInt(text) <= MAX_BIG
}

function isValidLimit(text: string): boolean {
  return isCanonicalInteger(text, 1n) && BigInt(text) <= 100n
}

/** A cursor the service could take: an opaque token it issued, i.e. base64url JSON {after}. */
function mayBeValidCursor(text: string): boolean {
  if (text.length === 0 || text.length > 64) return false
  try {
    const after = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'))?.after
    return Number.isSafeInteger(after) && after >= 0
  } catch {
    return false
  }
}

function isValidListQuery(entries: [string, string][]): boolean {
  const seen = new Set<string>()
  for (const [key, value] of entries) {
    if (!KNOWN_PARAMS.has(key) || seen.has(key)) return false
    seen.add(key)
    if (key === 'limit' && !isValidLimit(value)) return false
    if (key === 'status' && !(STATUSES as readonly string[]).includes(value)) return false
    if (key === 'cursor' && !mayBeValidCursor(value)) return false
  }
  return true
}

// ---- Generators ----

const anyString = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 12 }),
)

const validName = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 }).filter(isValidName)

/** Names that are wrong in one of the ways D6 lists, or arbitrary JSON. */
const nameish = fc.oneof(
  validName,
  anyString,
  fc.constantFrom('', ' ', '\t', '\u3000', 'a\u0000', 'a\n', '\u007f', '\u0085x'),
  fc.string({ unit: 'grapheme-ascii', minLength: 201, maxLength: 230 }),
  fc.string({ unit: fc.constantFrom('🐶', '👨‍👩‍👧‍👦', 'é', '中'), minLength: 60, maxLength: 210 }),
  fc.jsonValue({ maxDepth: 1 }),
)

const categoryIdish = fc.oneof(
  fc.integer({ min: 1, max: 1000 }),
  fc.integer(),
  fc.maxSafeInteger(),
  fc.double(),
  fc.constantFrom(0, -1, 1.5, MAX_ID + 1, Number.MAX_VALUE),
  anyString,
  fc.jsonValue({ maxDepth: 1 }),
)

const statusish = fc.oneof(
  fc.constantFrom(...STATUSES),
  fc.constantFrom('Available', 'SOLD', '', ' pending', 'adopted'),
  anyString,
  fc.jsonValue({ maxDepth: 1 }),
)

/** Objects near a NewPet: each field may be missing or wrong, and extra fields may come. */
const nearPet = fc
  .tuple(
    fc.record(
      { name: nameish, categoryId: categoryIdish, status: statusish },
      { requiredKeys: [] },
    ),
    fc.dictionary(
      fc.oneof(fc.constantFrom('id', 'ID', 'Name', 'category_id', '__proto__', 'extra'), anyString),
      fc.jsonValue({ maxDepth: 1 }),
      { maxKeys: 2 },
    ),
  )
  .map(([fields, extra]) => JSON.stringify({ ...extra, ...fields }))

/** Integers written in a form D6 refuses, placed in an otherwise valid body. */
const badNumberText = fc.oneof(
  fc.bigInt({ min: MAX_BIG + 1n, max: 2n ** 80n }).map(String),
  fc.bigInt({ min: -(2n ** 64n), max: 0n }).map(String),
  fc
    .integer({ min: 1, max: 10_000 })
    .chain((n) =>
      fc.constantFrom(`${n}.0`, `${n}e0`, `${n}E+0`, `${n}.000`, `${n * 10}e-1`, `${n}.0e0`),
    ),
)
const bodyWithBadNumber = fc
  .tuple(validName, badNumberText)
  .map(([name, number]) => `{"name":${JSON.stringify(name)},"categoryId":${number}}`)

/** Arbitrary text, and JSON with a piece cut out of it. */
const rawText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ maxLength: 40 }),
  fc
    .tuple(fc.json({ maxDepth: 2 }), fc.nat(), fc.nat({ max: 3 }))
    .map(
      ([text, at, cut]) =>
        text.slice(0, at % (text.length + 1)) + text.slice((at % (text.length + 1)) + cut),
    ),
)

const invalidBodyText = fc
  .oneof(
    fc.jsonValue().map((value) => JSON.stringify(value)),
    nearPet,
    nearPet,
    bodyWithBadNumber,
    rawText,
  )
  .filter((text) => !mayBeValidBodyText(text))

/** Is this byte string well-formed UTF-8? (The oracle: a fatal decoder, RFC 3629.) */
function isUtf8(bytes: Uint8Array): boolean {
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes)
    return true
  } catch {
    return false
  }
}

/**
 * Byte strings that are not UTF-8 (RFC 3629) and hold nothing JSON would stop a string at (no
 * control character, `"` or `\`): random bytes, and the ill-formed sequences decoders get wrong
 * (overlong forms, encoded surrogates, code points past U+10FFFF, sequences cut short), mixed
 * with well-formed characters.
 */
const notUtf8 = fc
  .array(
    fc.oneof(
      fc.uint8Array({ minLength: 1, maxLength: 6 }).map((b) => [...b]),
      fc.constantFrom(
        [0xc0, 0xaf],
        [0xc1, 0xbf],
        [0xe0, 0x80, 0xaf],
        [0xe0, 0x9f, 0xbf],
        [0xed, 0xa0, 0x80],
        [0xed, 0xbf, 0xbf],
        [0xf0, 0x80, 0x80, 0xaf],
        [0xf4, 0x90, 0x80, 0x80],
        [0xf8, 0x88, 0x80, 0x80, 0x80],
        [0xfe],
        [0xff],
        [0x80],
        [0xbf],
        [0xe2, 0x82],
        [0xf0, 0x9f, 0x90],
        [0xc3],
      ),
      fc.string({ unit: 'binary', minLength: 1, maxLength: 3 }).map((t) => [...Buffer.from(t)]),
    ),
    { minLength: 1, maxLength: 5 },
  )
  .map((pieces) =>
    Uint8Array.from(pieces.flat().filter((b) => b >= 0x20 && b !== 0x22 && b !== 0x5c)),
  )
  .filter((b) => b.length > 0 && !isUtf8(b))

/** A valid NewPet as UTF-8 with bytes that are not UTF-8 put into its name; where they start. */
const bodyWithBadUtf8 = fc
  .tuple(validName, fc.nat(), notUtf8, fc.integer({ min: 1, max: 1000 }))
  .map(([name, at, bad, categoryId]) => {
    const points = [...name]
    const cut = at % (points.length + 1)
    const head = Buffer.from(
      `{"name":${JSON.stringify(points.slice(0, cut).join('')).slice(0, -1)}`,
      'utf8',
    )
    const tail = Buffer.from(
      `${JSON.stringify(points.slice(cut).join('')).slice(1)},"categoryId":${categoryId}}`,
      'utf8',
    )
    return {
      body: Buffer.concat([head, bad, tail]),
      badFrom: head.length,
      badTo: head.length + bad.length,
    }
  })

/** A valid NewPet's JSON text with one of its keys written again, at times spelt with escapes. */
const bodyWithRepeatedKey = fc
  .tuple(
    fc.record(
      {
        name: validName,
        categoryId: fc.integer({ min: 1, max: 1000 }),
        status: fc.constantFrom(...STATUSES),
      },
      { requiredKeys: ['name', 'categoryId'] },
    ),
    fc.nat(),
    fc.nat(),
    fc.boolean(),
    // Any JSON value but a number with a fraction or exponent, which is refused for itself.
    fc.jsonValue({ maxDepth: 1 }).filter((value) => !/\d[.eE]/.test(JSON.stringify(value))),
  )
  .map(([pet, which, where, escaped, value]) => {
    const members = Object.entries(pet).map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`)
    const key = Object.keys(pet)[which % Object.keys(pet).length] ?? 'name'
    // "\u006e" is "n", and so on: the same key once unescaped.
    const spelt = escaped
      ? `"${[...key].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"`
      : JSON.stringify(key)
    members.splice(where % (members.length + 1), 0, `${spelt}:${JSON.stringify(value)}`)
    return { body: `{${members.join(',')}}`, key, members: members.length }
  })

const badQueryEntry: fc.Arbitrary<[string, string]> = fc.oneof(
  anyString
    .filter((value) => !isValidLimit(value))
    .map((value): [string, string] => ['limit', value]),
  fc
    .oneof(anyString, fc.constantFrom('Available', 'SOLD', 'available ', 'sold,pending'))
    .filter((value) => !(STATUSES as readonly string[]).includes(value))
    .map((value): [string, string] => ['status', value]),
  anyString
    .filter((value) => !mayBeValidCursor(value))
    .map((value): [string, string] => ['cursor', value]),
  fc
    .tuple(
      fc.oneof(
        fc.constantFrom('offset', 'page', 'Limit', 'STATUS', 'limit[]', '__proto__', 'constructor'),
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 10 }),
      ),
      anyString,
    )
    .filter(([key]) => !KNOWN_PARAMS.has(key)),
  // A valid entry: invalid only when it repeats one of the others.
  fc.integer({ min: 1, max: 100 }).map((n): [string, string] => ['limit', String(n)]),
)

const goodQueryEntry: fc.Arbitrary<[string, string]> = fc.oneof(
  fc.integer({ min: 1, max: 100 }).map((n): [string, string] => ['limit', String(n)]),
  fc.constantFrom(...STATUSES).map((status): [string, string] => ['status', status]),
)

/** Query strings for listPets with at least one wrong entry (bad value, unknown or repeated). */
const invalidQuery = fc
  .tuple(
    fc.array(goodQueryEntry, { maxLength: 2 }),
    fc.array(badQueryEntry, { minLength: 1, maxLength: 3 }),
  )
  .chain(([good, bad]) =>
    fc.shuffledSubarray([...good, ...bad], { minLength: good.length + bad.length }),
  )
  .filter((entries) => !isValidListQuery(entries))
  .map((entries) => new URLSearchParams(entries).toString())

/** Path segments that are not a canonical positive integer up to 2^53 − 1. */
const invalidPetId = fc
  .oneof(
    fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }),
    fc.string({ minLength: 1, maxLength: 20 }),
    fc.bigInt({ min: MAX_BIG + 1n, max: 2n ** 70n }).map(String),
    fc.bigInt({ min: -(2n ** 63n), max: 0n }).map(String),
    fc
      .integer({ min: 1, max: 1_000_000 })
      .chain((n) =>
        fc.constantFrom(
          `0${n}`,
          `${n}.0`,
          `+${n}`,
          `${n}e0`,
          ` ${n}`,
          `${n} `,
          `0x${n.toString(16)}`,
          `${n}.5`,
        ),
      ),
  )
  .filter((id) => !isCanonicalInteger(id, 1n))
  // fetch resolves dot segments, so these would not reach /v1/pets/{petId} at all.
  .filter((id) => id !== '.' && id !== '..')

const printableAscii = fc.string({ unit: 'grapheme-ascii', maxLength: 60 })

/** Authorization values that are not `Bearer <the key>`. */
function invalidAuthorization(key: string): fc.Arbitrary<string> {
  const mutatedKey = fc.oneof(
    fc.nat({ max: key.length - 1 }).map((i) => key.slice(0, i) + key.slice(i + 1)),
    fc
      .tuple(fc.nat({ max: key.length - 1 }), fc.constantFrom(...'abcXYZ019_-'))
      .map(([i, c]) => key.slice(0, i) + c + key.slice(i + 1)),
    printableAscii.map((suffix) => key + suffix),
    fc.constant(key.toUpperCase()),
    printableAscii,
  )
  const valid = new RegExp(`^bearer +${key.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} *$`, 'i')
  return (
    fc
      .oneof(
        printableAscii,
        fc
          .tuple(
            fc.constantFrom('Bearer ', 'bearer ', 'BEARER  ', 'Bearer', 'Bearer\t'),
            mutatedKey,
          )
          .map(([s, k]) => s + k),
        fc
          .tuple(
            fc.constantFrom('Basic ', 'Token ', 'Bearer: ', 'Bearer=', 'ApiKey ', ''),
            fc.constant(key),
          )
          .map(([s, k]) => s + k),
        fc.constant(`Bearer ${key} ${key}`),
        fc.constant(`Bearer ${key}, Bearer ${key}`),
      )
      // fetch strips leading and trailing white space from a header value.
      .filter((value) => !valid.test(value.trim()))
  )
}

// ---- The properties ----

/** Asserts an Error body with the HTTP status; returns it. */
async function expectError(response: Response, status: number, code: string) {
  assert.equal(response.status, status)
  const error = await errorOf(response)
  assert.equal(error.code, code)
  assert.equal(error.status, response.status)
  assert.deepEqual(Object.keys(error).sort(), ['code', 'message', 'status'])
  return error
}

describe('property: invalid requests are refused with an Error body and change nothing', () => {
  let server: TestServer
  let existing: Pet

  before(async () => {
    server = await startServer()
    for (const [i, status] of [...STATUSES, undefined].entries()) {
      const response = await createPet(server, {
        name: `seed ${i}`,
        categoryId: i + 1,
        ...(status ? { status } : {}),
      })
      assert.equal(response.status, 201)
      existing = (await response.json()) as Pet
    }
  })
  after(() => server.close())

  /** Runs a property and checks the full list of pets is the same before and after. */
  async function unchanged(run: () => Promise<void>) {
    const before = await listAll(server)
    assert.ok(before.length > 0)
    await run()
    assert.deepEqual(await listAll(server), before)
  }

  test('the oracle tells valid from invalid as D6 says', () => {
    for (const valid of [
      { name: 'Rex', categoryId: 1 },
      { name: ' 🐶 ', categoryId: MAX_ID, status: 'sold' },
      { name: '🐶'.repeat(200), categoryId: 2, status: 'pending' },
    ]) {
      assert.ok(isValidNewPet(valid), JSON.stringify(valid))
    }
    for (const invalid of [
      null,
      [],
      { name: 'Rex' },
      { name: '', categoryId: 1 },
      { name: ' ', categoryId: 1 },
      { name: 'a\n', categoryId: 1 },
      { name: '\ud800', categoryId: 1 },
      { name: 'a'.repeat(201), categoryId: 1 },
      { name: 'Rex', categoryId: 0 },
      { name: 'Rex', categoryId: 1.5 },
      { name: 'Rex', categoryId: MAX_ID + 1 },
      { name: 'Rex', categoryId: '1' },
      { name: 'Rex', categoryId: 1, status: 'Sold' },
      { name: 'Rex', categoryId: 1, id: 1 },
    ]) {
      assert.ok(!isValidNewPet(invalid), JSON.stringify(invalid))
    }
    assert.ok(
      isValidListQuery([
        ['limit', '5'],
        ['status', 'sold'],
      ]),
    )
    assert.ok(
      !isValidListQuery([
        ['limit', '5'],
        ['limit', '5'],
      ]),
    )
    assert.ok(!isValidListQuery([['limit', '05']]))
    assert.ok(!isValidListQuery([['foo', '1']]))
    // Every generator yields only invalid inputs (a sample, checked against the oracle).
    for (const text of fc.sample(invalidBodyText, 300)) assert.ok(!mayBeValidBodyText(text), text)
    // Numbers in a form D6 refuses are invalid to the oracle too, so they survive its filter.
    assert.ok(mayBeValidBodyText('{"name":"Rex","categoryId":10}'))
    for (const form of ['10.0', '1e1', '10E+0', '100e-1', '010', '-0']) {
      const text = `{"name":"Rex","categoryId":${form}}`
      assert.ok(!mayBeValidBodyText(text), text)
    }
    assert.deepEqual(numberTokens('{"a":"1.0 \\"2\\"","b":[-3,4.5e+6]}'), ['-3', '4.5e+6'])
    for (const text of fc.sample(bodyWithBadNumber, 300)) assert.ok(!mayBeValidBodyText(text), text)
    for (const id of fc.sample(invalidPetId, 300)) assert.ok(!isCanonicalInteger(id, 1n), id)
    for (const { body } of fc.sample(bodyWithBadUtf8, 300)) assert.ok(!isUtf8(body))
    // A repeat is real: JSON.parse, which keeps one of each key, sees one member fewer.
    for (const { body, key, members } of fc.sample(bodyWithRepeatedKey, 300)) {
      const parsed = JSON.parse(body) as object
      assert.equal(Object.keys(parsed).length, members - 1, body)
      assert.ok(Object.hasOwn(parsed, key), body)
    }
    assert.ok(isUtf8(Buffer.from('é🐶')) && !isUtf8(Uint8Array.from([0xed, 0xa0, 0x80])))
  })

  test('random invalid JSON bodies → 400 invalid_request, nothing created', async () => {
    await unchanged(() =>
      fc.assert(
        fc.asyncProperty(invalidBodyText, async (text) => {
          const response = await postRaw(server, text)
          await expectError(response, 400, 'invalid_request')
          assert.equal(response.headers.get('location'), null)
        }),
        { numRuns: NUM_RUNS * 2 },
      ),
    )
  })

  test('valid JSON with bytes that are not UTF-8 in it → 400 naming where, nothing created', async () => {
    await unchanged(() =>
      fc.assert(
        fc.asyncProperty(bodyWithBadUtf8, async ({ body, badFrom, badTo }) => {
          const response = await postRaw(server, body)
          const error = await expectError(response, 400, 'invalid_request')
          const at = /not valid UTF-8 \(RFC 8259 §8\.1\).* at byte (\d+) /.exec(error.message)
          assert.ok(at, error.message)
          // Everything before the inserted bytes is well-formed, and the first bad sequence
          // starts among them.
          const offset = Number(at[1])
          assert.ok(offset >= badFrom && offset < badTo, `${offset} in [${badFrom}, ${badTo})`)
        }),
        { numRuns: NUM_RUNS },
      ),
    )
  })

  test('a valid NewPet with one key written twice → 400 naming the key, nothing created', async () => {
    await unchanged(() =>
      fc.assert(
        fc.asyncProperty(bodyWithRepeatedKey, async ({ body, key }) => {
          const error = await expectError(await postRaw(server, body), 400, 'invalid_request')
          assert.ok(error.message.includes(`"${key}" more than once`), error.message)
        }),
        { numRuns: NUM_RUNS },
      ),
    )
  })

  test('a valid body under a Content-Type that is not JSON → 415, nothing created', async () => {
    const mediaType = fc
      .oneof(
        // The types clients really send by mistake…
        fc.constantFrom(
          'text/plain',
          'text/plain; charset=utf-8',
          'TEXT/PLAIN',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=x',
          'application/octet-stream',
          'application/xml',
          'text/json',
          'application/jsonx',
          'application/problem+json',
          'application/json-seq',
        ),
        // …and any other.
        fc
          .tuple(
            fc.constantFrom('text', 'application', 'multipart', 'image', 'x-custom'),
            fc.stringMatching(/^[a-z0-9][a-z0-9.+-]{0,15}$/),
            fc.option(fc.constantFrom('; charset=utf-8', '; boundary=x', ';q=1'), { nil: '' }),
          )
          .map(([type, subtype, params]) => `${type}/${subtype}${params}`),
      )
      .filter((type) => type.split(';')[0]?.trim().toLowerCase() !== 'application/json')
    const body = JSON.stringify({ name: 'Should not exist', categoryId: 1 })
    await unchanged(() =>
      fc.assert(
        fc.asyncProperty(mediaType, async (type) => {
          await expectError(await postRaw(server, body, type), 415, 'unsupported_media_type')
        }),
        { numRuns: NUM_RUNS },
      ),
    )
  })

  test('random invalid listPets query strings → 400 invalid_request', async () => {
    await unchanged(() =>
      fc.assert(
        fc.asyncProperty(invalidQuery, async (query) => {
          const response = await server.request(`/v1/pets?${query}`)
          await expectError(response, 400, 'invalid_request')
          assert.equal(response.headers.get('link'), null)
        }),
        { numRuns: NUM_RUNS },
      ),
    )
  })

  test('any unknown query parameter, even beside valid ones → 400 naming it', async () => {
    const unknownKey = fc
      .oneof(
        fc.constantFrom('offset', 'page', 'Limit', 'STATUS', 'limit[]', '__proto__', 'constructor'),
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 10 }),
        fc.string({ minLength: 1, maxLength: 10 }),
      )
      .filter((key) => !KNOWN_PARAMS.has(key))
    await unchanged(() =>
      fc.assert(
        fc.asyncProperty(
          unknownKey,
          anyString,
          fc.uniqueArray(goodQueryEntry, { maxLength: 2, selector: ([key]) => key }),
          async (key, value, good) => {
            const query = new URLSearchParams([...good, [key, value]])
            const response = await server.request(`/v1/pets?${query}`)
            const error = await expectError(response, 400, 'invalid_request')
            assert.ok(error.message.includes(key), `${error.message} names ${key}`)
          },
        ),
        { numRuns: NUM_RUNS },
      ),
    )
  })

  test('random invalid petIds → 400 invalid_request', async () => {
    await unchanged(() =>
      fc.assert(
        fc.asyncProperty(invalidPetId, async (id) => {
          const response = await server.request(`/v1/pets/${encodeURIComponent(id)}`)
          await expectError(response, 400, 'invalid_request')
        }),
        { numRuns: NUM_RUNS },
      ),
    )
  })

  test('random bad Authorization headers → 401 unauthorized on every operation, nothing created', async () => {
    const operations: { method: string; path: string; body?: string }[] = [
      { method: 'GET', path: '/v1/pets' },
      { method: 'GET', path: '/v1/pets?limit=0' },
      { method: 'GET', path: `/v1/pets/${existing.id}` },
      { method: 'GET', path: '/v1/pets/abc' },
      {
        method: 'POST',
        path: '/v1/pets',
        body: JSON.stringify({ name: 'Intruder', categoryId: 1 }),
      },
      { method: 'POST', path: '/v1/pets', body: '{"broken' },
    ]
    await unchanged(() =>
      fc.assert(
        fc.asyncProperty(
          invalidAuthorization(server.key),
          fc.constantFrom(...operations),
          async (authorization, { method, path, body }) => {
            const response = await fetch(server.url + path, {
              method,
              headers: { authorization, 'content-type': 'application/json' },
              ...(body === undefined ? {} : { body }),
            })
            await expectError(response, 401, 'unauthorized')
            assert.match(response.headers.get('www-authenticate') ?? '', /^Bearer realm="petstore"/)
          },
        ),
        { numRuns: NUM_RUNS },
      ),
    )
  })
})

describe('property: the oracle is not too strict (valid bodies are accepted)', () => {
  let server: TestServer
  before(async () => {
    server = await startServer()
  })
  after(() => server.close())

  test('random valid NewPets → 201, and they read back exactly', async () => {
    const validPet = fc.record(
      {
        name: validName,
        categoryId: fc.oneof(
          fc.integer({ min: 1, max: 1000 }),
          fc.integer({ min: 1, max: MAX_ID }),
        ),
        status: fc.constantFrom(...STATUSES),
      },
      { requiredKeys: ['name', 'categoryId'] },
    )
    const created: Pet[] = []
    await fc.assert(
      fc.asyncProperty(validPet, async (pet) => {
        assert.ok(isValidNewPet(pet))
        const response = await createPet(server, pet)
        assert.equal(response.status, 201, JSON.stringify(pet))
        const body = (await response.json()) as Pet
        assert.deepEqual({ ...body, id: 0 }, { ...pet, id: 0 })
        created.push(body)
      }),
      { numRuns: 100 },
    )
    assert.deepEqual(await listAll(server), created)
  })

  test('valid names in raw UTF-8, astral characters included → 201, and they read back byte for byte', async () => {
    const astral = fc
      .integer({ min: 0x10000, max: 0x10ffff })
      .map((point) => String.fromCodePoint(point))
    const name = fc
      .string({
        unit: fc.oneof(astral, fc.string({ unit: 'binary', minLength: 1, maxLength: 1 })),
        minLength: 1,
        maxLength: 40,
      })
      .filter(isValidName)
    await fc.assert(
      fc.asyncProperty(name, fc.integer({ min: 1, max: MAX_ID }), async (name, categoryId) => {
        // JSON.stringify leaves every non-ASCII character as it is: the bytes are raw UTF-8.
        const body = Buffer.from(JSON.stringify({ name, categoryId }), 'utf8')
        const response = await postRaw(server, body)
        assert.equal(response.status, 201, JSON.stringify(name))
        const pet = (await response.json()) as Pet
        assert.ok(Buffer.from(pet.name, 'utf8').equals(Buffer.from(name, 'utf8')))
        const fetched = await server.request(`/v1/pets/${pet.id}`)
        const stored = Buffer.from(((await fetched.json()) as Pet).name, 'utf8')
        assert.ok(stored.equals(Buffer.from(name, 'utf8')), 'stored byte for byte')
      }),
      { numRuns: NUM_RUNS },
    )
  })
})
