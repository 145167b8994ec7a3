// D16, D23: what a client puts in a URL reaches a span's url.path, url.query and url.full only
// redacted, as it reaches the log (observability/logging.ts): the query by allow-list (the
// contract's listPets parameters), a key of ours wherever it is, percent-encoded or not. Pure
// functions: redactUrlAttributes as the span processor calls it before a span ends.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, test } from 'node:test'
import type { Attributes } from '@opentelemetry/api'
import { generateApiKey } from '../src/contract/api-key.ts'
import { ListPetsQuery } from '../src/contract/schemas.ts'
import { redactUrl } from '../src/observability/logging.ts'
import { redactUrlAttributes } from '../src/observability/tracing/pipeline.ts'
import { CREDENTIAL_URLS, KEY_BODY, SECRETS } from './helpers/url-credentials.ts'

const KEY = generateApiKey('production')
/** The key's body, as a client that percent-encodes the underscores leaves it. */
const BODY = KEY.slice('petstore_live_'.length)

/** The attributes as a span ends with them: redactUrlAttributes' changes applied. */
function ended(attributes: Attributes): Attributes {
  return { ...attributes, ...redactUrlAttributes(attributes) }
}

/** The span attributes the server sets for a request target (http/plugins/tracing.ts). */
function spanOf(target: string): Attributes {
  const question = target.indexOf('?')
  const attributes: Attributes = {
    'url.path': question === -1 ? target : target.slice(0, question),
    'url.full': `http://127.0.0.1:8080${target}`,
  }
  if (question !== -1) attributes['url.query'] = target.slice(question + 1)
  return ended(attributes)
}

describe('span URL attributes: the credentials of issue 46 never reach them (D16, D23)', () => {
  for (const [target, path, query] of CREDENTIAL_URLS) {
    test(`${target.replace(KEY_BODY, '<body>')}: url.path ${path}, url.query ${query}`, () => {
      const span = spanOf(target)
      const text = JSON.stringify(span)
      for (const secret of [...SECRETS, KEY_BODY]) assert.ok(!text.includes(secret), text)
      assert.equal(span['url.path'], path)
      assert.equal(span['url.query'], query)
      assert.equal(span['url.full'], `http://127.0.0.1:8080${path}${query ? `?${query}` : ''}`)
    })
  }
})

describe("the query: by allow-list, the contract's listPets parameters (D5, D16)", () => {
  test('known parameters with values they could have are kept as sent; nothing else is', () => {
    const target = '/v1/pets?limit=20&status=sold&cursor=eyJhZnRlciI6MjB9'
    assert.deepEqual(redactUrlAttributes(spanOf(target)), {}, 'nothing to redact')
    assert.equal(spanOf(target)['url.query'], 'limit=20&status=sold&cursor=eyJhZnRlciI6MjB9')
    // A refused value is shown too, so the log says why a request was a 400.
    assert.equal(spanOf('/v1/pets?limit=abc')['url.query'], 'limit=abc')
  })

  test('the allow-list is exactly the query parameters of the contract and of openapi.json', () => {
    const contract = Object.keys(ListPetsQuery.properties).sort()
    const document = JSON.parse(readFileSync('docs/openapi.json', 'utf8')) as {
      paths: Record<string, Record<string, { parameters?: { name: string; in: string }[] }>>
    }
    const published = Object.values(document.paths)
      .flatMap((operations) => Object.values(operations))
      .flatMap((operation) => operation.parameters ?? [])
      .filter((parameter) => parameter.in === 'query')
      .map((parameter) => parameter.name)
      .sort()
    assert.deepEqual(published, contract)
    for (const name of contract) {
      assert.equal(redactUrl(`/v1/pets?${name}=shown`), `/v1/pets?${name}=shown`, name)
      // Names are compared as sent: another case is another (refused) parameter.
      const other = name.toUpperCase()
      assert.equal(redactUrl(`/v1/pets?${other}=x`), `/v1/pets?${other}=[redacted]`, other)
    }
  })

  test('a known parameter still loses a value holding a key, or a second pair', () => {
    for (const value of [KEY, `petstore%5Flive%5F${BODY}`, `%70etstore_live_${BODY}`]) {
      assert.equal(spanOf(`/v1/pets?cursor=${value}`)['url.query'], 'cursor=[redacted]', value)
    }
    // `;` separates pairs for some clients; the value shown would be the next pair's.
    assert.equal(spanOf('/v1/pets?limit=5;api_key=s5')['url.query'], 'limit=[redacted]')
  })

  test('a bare name outside the allow-list is redacted whole: it may be a token alone', () => {
    assert.equal(spanOf('/v1/pets?s6-bare-token')['url.query'], '[redacted]')
    assert.equal(spanOf('/v1/pets?limit=5&s6-bare-token')['url.query'], 'limit=5&[redacted]')
    assert.equal(spanOf('/v1/pets?limit')['url.query'], 'limit')
    assert.equal(spanOf('/v1/pets?=s7')['url.query'], '[redacted]')
  })

  test('a name that holds a key is redacted whole, name and value', () => {
    assert.equal(spanOf(`/v1/pets?${KEY}=1`)['url.query'], '[redacted]')
    assert.equal(spanOf(`/v1/pets?petstore%5Flive%5F${BODY}`)['url.query'], '[redacted]')
  })

  test('empty pairs and a lone `?` are kept', () => {
    assert.equal(redactUrl('/v1/pets?'), '/v1/pets?')
    assert.equal(redactUrl('/v1/pets?&limit=1&&'), '/v1/pets?&limit=1&&')
  })
})

describe('the path: as sent, but a segment holding a key (RFC 3986 §2.1 decoded) (D16)', () => {
  test('a key however percent-encoded, once or twice, takes its segment', () => {
    for (const segment of [
      KEY,
      `petstore%5Flive%5F${BODY}`,
      `%70etstore_live_${BODY}`,
      `petstore_live_%${BODY.charCodeAt(0).toString(16)}${BODY.slice(1)}`,
      `petstore%255Flive%255F${BODY}`,
      `prefix-${KEY}-suffix`,
    ]) {
      assert.equal(spanOf(`/v1/pets/${segment}/x`)['url.path'], '/v1/pets/[redacted]/x', segment)
    }
  })

  test('a staging key too', () => {
    const staging = generateApiKey('staging')
    assert.equal(spanOf(`/v1/pets/${staging}`)['url.path'], '/v1/pets/[redacted]')
  })

  test('anything else stays as sent, escapes and malformed `%` included, without throwing', () => {
    for (const path of [
      '/v1/pets/42',
      '/v1/pets/caf%C3%A9',
      '/v1/pets/%E0%A4%A',
      '/v1/pets/100%',
      '/v1/pets/%zz',
      '/v1/pets/petstore_live_short',
    ]) {
      assert.deepEqual(redactUrlAttributes({ 'url.path': path }), {}, path)
    }
    assert.equal(redactUrl('/v1/pets/%E0%A4%A?x=%'), '/v1/pets/%E0%A4%A?x=[redacted]')
  })

  test('attributes that are not strings, or absent, are left alone', () => {
    assert.deepEqual(redactUrlAttributes({ 'url.path': 7, 'http.route': `/v1/pets/${KEY}` }), {})
  })
})

describe('a credential written into the path, or as a bare token, is redacted too (D16)', () => {
  test('parameters in a path segment (`;`, a fragment, an encoded `?`) take the segment with them', () => {
    const cases: [string, string][] = [
      ['/v1/pets;access_token=SECRET2', '/v1/[redacted]'],
      ['/healthz#token=SECRET11', '/[redacted]'],
      ['/v1/pets#access_token=SECRET3?limit=5', '/v1/[redacted]?limit=5'],
      ['/v1/pets%3Fapi_key=SECRET10', '/v1/[redacted]'],
      ['/v1/pets/7&key=SECRET12', '/v1/pets/[redacted]'],
    ]
    for (const [target, logged] of cases) assert.equal(redactUrl(target), logged, target)
  })

  test("the API's own paths go as they came", () => {
    for (const target of ['/v1/pets', '/v1/pets/42', '/docs/static/index.html', '/healthz']) {
      assert.equal(redactUrl(target), target)
    }
  })

  test('a bare token that ends in `=` is redacted whole; a parameter name is kept', () => {
    assert.equal(redactUrl('/v1/pets?dGhpc2lzYXNlY3JldA=='), '/v1/pets?[redacted]')
    assert.equal(redactUrl('/v1/pets?dGhpc2lzYXNlY3JldA='), '/v1/pets?[redacted]')
    assert.equal(redactUrl('/v1/pets?x-api-key=abc'), '/v1/pets?x-api-key=[redacted]')
  })
})
