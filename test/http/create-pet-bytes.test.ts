// createPet takes the body's bytes exactly as sent, or refuses them (D6, D16): invalid UTF-8 is
// a 400 naming where (RFC 8259 §8.1), a charset other than UTF-8 a 415 naming it, and a key given
// twice a 400 naming it (RFC 8259 §4). Nothing is stored when a body is refused. Black-box over
// HTTP against a listening server.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { errorOf, startServer, type TestServer } from '../helpers/server.ts'
import { listAll, type Pet, postRaw } from './support.ts'

/** A body from pieces: strings are sent as UTF-8, number arrays as the raw bytes they list. */
function bytes(...pieces: (string | number[])[]): Uint8Array {
  return Buffer.concat(
    pieces.map((piece) =>
      typeof piece === 'string' ? Buffer.from(piece, 'utf8') : Buffer.from(piece),
    ),
  )
}

describe('createPet: the body’s bytes, exactly', () => {
  let server: TestServer
  before(async () => {
    server = await startServer()
  })
  after(() => server.close())

  /** POSTs the body, expects the Error body with this status and code, and that nothing was stored. */
  async function refused(
    body: string | Uint8Array,
    status: number,
    code: string,
    contentType = 'application/json',
  ): Promise<string> {
    const before = await listAll(server)
    const response = await postRaw(server, body, contentType)
    assert.equal(response.status, status)
    assert.equal(response.headers.get('location'), null)
    assert.ok(response.headers.get('x-request-id'))
    const error = await errorOf(response)
    assert.equal(error.code, code)
    assert.deepEqual(await listAll(server), before, 'nothing was stored')
    return error.message
  }

  async function created(
    body: string | Uint8Array,
    contentType = 'application/json',
  ): Promise<Pet> {
    const response = await postRaw(server, body, contentType)
    assert.equal(response.status, 201, await response.clone().text())
    const pet = (await response.json()) as Pet
    const fetched = await server.request(`/v1/pets/${pet.id}`)
    assert.deepEqual(await fetched.json(), pet, 'stored as answered')
    return pet
  }

  describe('invalid UTF-8 → 400 invalid_request naming the byte, nothing stored (RFC 8259 §8.1)', () => {
    // [label, bytes that are not well-formed UTF-8]
    const cases: [label: string, bad: number[]][] = [
      ['0xFF 0xFE (the issue’s example)', [0xff, 0xfe]],
      ['a lone continuation byte', [0x80]],
      ['a Latin-1 é (0xE9) before ASCII', [0xe9]],
      ['an overlong "/" (0xC0 0xAF)', [0xc0, 0xaf]],
      ['an overlong three-byte form (0xE0 0x80 0xAF)', [0xe0, 0x80, 0xaf]],
      ['a UTF-16 surrogate encoded (CESU-8, 0xED 0xA0 0x80)', [0xed, 0xa0, 0x80]],
      ['a code point above U+10FFFF (0xF4 0x90 0x80 0x80)', [0xf4, 0x90, 0x80, 0x80]],
      ['a lead byte 0xF5', [0xf5, 0x80, 0x80, 0x80]],
      ['a three-byte sequence cut short (0xE2 0x82)', [0xe2, 0x82]],
      ['a four-byte sequence cut short (0xF0 0x9F 0x90)', [0xf0, 0x9f, 0x90]],
    ]
    for (const [label, bad] of cases) {
      test(`in the name: ${label}`, async () => {
        const head = '{"name":"bad'
        const message = await refused(bytes(head, bad, '","categoryId":1}'), 400, 'invalid_request')
        assert.match(message, /not valid UTF-8 \(RFC 8259 §8\.1\)/)
        assert.match(
          message,
          new RegExp(`at byte ${Buffer.byteLength(head)} \\(0x${bad[0]?.toString(16)}\\)`),
        )
      })
    }

    test('outside any string (between tokens)', async () => {
      const message = await refused(
        bytes('{"name":"Rex",', [0xa0], '"categoryId":1}'),
        400,
        'invalid_request',
      )
      assert.match(message, /UTF-8.*at byte 14 \(0xa0\)/)
    })

    test('in a key', async () => {
      const message = await refused(
        bytes('{"name":"Rex","categoryId":1,"', [0xff], '":1}'),
        400,
        'invalid_request',
      )
      assert.match(message, /UTF-8/)
    })

    test('cut short at the very end of the body', async () => {
      const message = await refused(
        bytes('{"name":"Rex","categoryId":1}', [0xe2, 0x82]),
        400,
        'invalid_request',
      )
      assert.match(message, /UTF-8.*at byte 29/)
    })

    test('a Latin-1 body sent as UTF-8 (the name Café in ISO-8859-1)', async () => {
      const latin1 = Buffer.from('{"name":"Café","categoryId":1}', 'latin1')
      const message = await refused(
        latin1,
        400,
        'invalid_request',
        'application/json; charset=utf-8',
      )
      assert.match(message, /UTF-8/)
    })

    test('a UTF-16 body (with its byte order mark)', async () => {
      const utf16 = Buffer.concat([
        Buffer.from([0xff, 0xfe]),
        Buffer.from('{"name":"Rex","categoryId":1}', 'utf16le'),
      ])
      assert.match(await refused(utf16, 400, 'invalid_request'), /UTF-8/)
    })

    test('a UTF-8 byte order mark before the JSON → 400 naming it (RFC 8259 §8.1)', async () => {
      const message = await refused(
        bytes([0xef, 0xbb, 0xbf], '{"name":"Rex","categoryId":1}'),
        400,
        'invalid_request',
      )
      assert.match(message, /byte order mark/)
    })
  })

  describe('well-formed UTF-8 is stored exactly', () => {
    for (const [label, name] of [
      ['two-byte (é), three-byte (柴) and four-byte (🐶) characters', 'é柴🐶'],
      ['the first and last astral code points (U+10000, U+10FFFF)', '\u{10000}x\u{10FFFF}'],
      ['U+FFFD itself, sent as its UTF-8 bytes', 'a\uFFFDb'],
      ['the largest two- and three-byte code points (U+07FF, U+FFFF)', '\u07ff\uffff'],
    ]) {
      test(label ?? '', async () => {
        const raw = bytes(`{"name":${JSON.stringify(name)},"categoryId":1}`)
        const pet = await created(raw)
        assert.ok(Buffer.from(pet.name, 'utf8').equals(Buffer.from(name ?? '', 'utf8')))
      })
    }
  })

  describe('charset: UTF-8 or none; any other is 415 naming it', () => {
    for (const type of [
      'application/json',
      'application/json; charset=utf-8',
      'application/json; charset=UTF-8',
      'application/json;charset=utf-8',
      'application/json; charset="utf-8"',
      'application/json; charset=utf8',
      'Application/JSON; Charset=Utf-8',
      'application/json; foo="a;charset=latin1"; charset=utf-8',
    ]) {
      test(`${type} → 201`, async () => {
        await created(JSON.stringify({ name: 'Charset é', categoryId: 1 }), type)
      })
    }

    for (const [type, named] of [
      ['application/json; charset=iso-8859-1', 'iso-8859-1'],
      ['application/json; charset=ISO-8859-1', 'ISO-8859-1'],
      ['application/json; charset="iso-8859-1"', 'iso-8859-1'],
      ['application/json; charset=latin1', 'latin1'],
      ['application/json; charset=windows-1252', 'windows-1252'],
      ['application/json; charset=utf-16', 'utf-16'],
      ['application/json; charset=us-ascii', 'us-ascii'],
      ['application/json; charset=', ''],
      ['application/json; charset = latin1', 'latin1'],
      ['application/json; charset=utf-8; charset=latin1', 'latin1'],
    ] as const) {
      test(`${type} → 415 naming "${named}"`, async () => {
        // An ASCII body, valid in any of these: the charset alone is refused.
        const message = await refused(
          JSON.stringify({ name: 'Not stored', categoryId: 1 }),
          415,
          'unsupported_media_type',
          type,
        )
        assert.ok(message.includes(`charset "${named}"`), message)
        assert.match(message, /UTF-8/)
      })
    }

    test('the issue’s case: a Latin-1 body sent with charset=iso-8859-1 → 415', async () => {
      const message = await refused(
        Buffer.from('{"name":"Café","categoryId":1}', 'latin1'),
        415,
        'unsupported_media_type',
        'application/json; charset=iso-8859-1',
      )
      assert.match(message, /"iso-8859-1"/)
    })
  })

  describe('a key given twice → 400 naming it, nothing stored (RFC 8259 §4)', () => {
    // [label, body, the key the message must name]
    const cases: [label: string, body: string, key: string][] = [
      ['name twice (the issue’s example)', '{"name":"a","name":"b","categoryId":1}', 'name'],
      [
        'categoryId twice, far apart',
        '{"categoryId":1,"name":"a","status":"sold","categoryId":2}',
        'categoryId',
      ],
      [
        'status twice with the same value',
        '{"name":"a","categoryId":1,"status":"sold","status":"sold"}',
        'status',
      ],
      [
        '"\\u006eame" and "name" (the same key once unescaped)',
        '{"\\u006eame":"a","name":"b","categoryId":1}',
        'name',
      ],
      ['"a\\/b" and "a/b"', '{"name":"x","categoryId":1,"a\\/b":1,"a/b":2}', 'a/b'],
      [
        'a key ending in an escaped backslash',
        '{"name":"x","categoryId":1,"k\\\\":1,"k\\\\":2}',
        'k\\',
      ],
      [
        'a key with an escaped quote',
        '{"name":"x","categoryId":1,"say \\"hi\\"":1,"say \\"hi\\"":2}',
        'say "hi"',
      ],
      ['__proto__ twice', '{"__proto__":1,"name":"x","categoryId":1,"__proto__":2}', '__proto__'],
      [
        'white space around the colons',
        '{ "name" : "a" ,\n\t"name"\r\n:\t"b", "categoryId" : 1 }',
        'name',
      ],
      ['in a nested object', '{"name":"x","categoryId":1,"extra":{"k":1,"k":2}}', 'k'],
      [
        'in an object inside an array',
        '{"name":"x","categoryId":1,"extra":[1,{"k":1,"j":[],"k":2}]}',
        'k',
      ],
      ['the empty key', '{"name":"x","categoryId":1,"":1,"":2}', ''],
    ]
    for (const [label, body, key] of cases) {
      test(label, async () => {
        JSON.parse(body) // each is valid JSON: only the repeated key is wrong with it
        const message = await refused(body, 400, 'invalid_request')
        assert.ok(message.includes(`${JSON.stringify(key)} more than once`), message)
        assert.match(message, /RFC 8259 §4/)
      })
    }

    test('a repeat 2,700 objects deep, in a 16 KiB body → 400 naming it', async () => {
      const depth = 2700
      const body = `{"name":"x","categoryId":1,"n":":",${'"a":{'.repeat(depth)}"k":1,"k":2${'}'.repeat(depth)}}`
      assert.ok(body.length <= 16384)
      const message = await refused(body, 400, 'invalid_request')
      assert.ok(message.includes('"k" more than once in one object'), message)
    })

    test('arrays nested 8,000 deep → 400 for the body, not a failure', async () => {
      const message = await refused(
        `${'['.repeat(8000)}${']'.repeat(8000)}`,
        400,
        'invalid_request',
      )
      assert.match(message, /body must be a JSON object/)
    })

    test('the same key in two different objects is not a repeat', async () => {
      const message = await refused(
        '{"name":"x","categoryId":1,"extra":[{"k":1},{"k":2}],"more":{"k":3}}',
        400,
        'invalid_request',
      )
      assert.match(message, /unknown fields: "extra", "more"/, 'refused for its fields alone')
    })

    for (const [label, pet] of [
      ['a name equal to a key', { name: 'name', categoryId: 1, status: 'sold' }],
      ['colons inside the name', { name: 'Rex: 12:30 "a":"b"', categoryId: 1 }],
      ['a name that looks like repeated keys', { name: '{"name":1,"name":2}', categoryId: 2 }],
    ] as const) {
      test(`no repeat: ${label} → 201`, async () => {
        const pet201 = await created(JSON.stringify(pet))
        assert.equal(pet201.name, pet.name)
      })
    }
  })
})
