// D26: gzip and brotli where the client accepts them, for successful bodies over about 1 KiB;
// ETags and 304s for the OpenAPI document and the /docs files, and cache headers that let
// browsers keep the files. Over node:http, which sends exactly the headers given and hands back
// the bytes as sent (fetch adds Accept-Encoding and decodes by itself).
import assert from 'node:assert/strict'
import { readdirSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { dirname, join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import { MAX_ID, NAME_MAX_LENGTH } from '../../src/contract/limits.ts'
import { COMPRESSION_THRESHOLD_BYTES } from '../../src/http/plugins/compression.ts'
import {
  DOCS_PREFIX,
  docsFileCompressions,
  VERSIONED_ASSET_CACHE_CONTROL,
} from '../../src/http/plugins/docs-page.ts'
import { startServer, type TestServer } from '../helpers/server.ts'

interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  /** The bytes on the wire, before any decoding. */
  body: Buffer
}

function send(
  server: TestServer,
  path: string,
  headers: Record<string, string> = {},
  method = 'GET',
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${server.url}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
      )
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(body)
  })
}

function authorized(server: TestServer, headers: Record<string, string> = {}) {
  return { authorization: `Bearer ${server.key}`, ...headers }
}

/** The body as the client reads it once it has undone the content coding. */
function decoded(answer: Answer): string {
  const coding = answer.headers['content-encoding']
  if (coding === 'gzip') return gunzipSync(answer.body).toString('utf8')
  if (coding === 'br') return brotliDecompressSync(answer.body).toString('utf8')
  assert.equal(coding, undefined, `unexpected content coding ${coding}`)
  return answer.body.toString('utf8')
}

describe('compression and caching (D26)', () => {
  let server: TestServer

  before(async () => {
    server = await startServer()
    for (let i = 1; i <= 100; i++) {
      await server.store.pets.create({
        name: `Compressible pet number ${i}`,
        categoryId: i,
        status: 'available',
      })
    }
  })
  after(() => server?.close())

  describe('content codings', () => {
    const LIST_100 = '/v1/pets?limit=100'

    it('a list of 100 goes as it is without Accept-Encoding, or with identity', async () => {
      const requests: Record<string, string>[] = [{}, { 'accept-encoding': 'identity' }]
      for (const headers of requests) {
        const answer = await send(server, LIST_100, authorized(server, headers))
        assert.equal(answer.status, 200)
        assert.equal(answer.headers['content-encoding'], undefined)
        assert.ok(
          answer.body.length > COMPRESSION_THRESHOLD_BYTES,
          'the list is over the threshold',
        )
        assert.equal((JSON.parse(answer.body.toString('utf8')) as unknown[]).length, 100)
      }
    })

    it('is gzip or br as the client asks, with Vary, and decodes to the same bytes', async () => {
      const plain = await send(server, LIST_100, authorized(server))
      const cases: [string, string][] = [
        ['gzip', 'gzip'],
        ['br', 'br'],
        ['gzip, deflate, br', 'br'],
        ['br;q=0.5, gzip', 'gzip'],
        ['br;q=0, gzip;q=0.1', 'gzip'],
        ['x-gzip', 'gzip'],
      ]
      for (const [acceptEncoding, expected] of cases) {
        const answer = await send(
          server,
          LIST_100,
          authorized(server, { 'accept-encoding': acceptEncoding }),
        )
        assert.equal(answer.status, 200)
        assert.equal(
          answer.headers['content-encoding'],
          expected,
          `Accept-Encoding: ${acceptEncoding}`,
        )
        assert.match(String(answer.headers.vary), /accept-encoding/i)
        assert.ok(answer.body.length < plain.body.length / 3, `${expected} saves most of the bytes`)
        assert.equal(decoded(answer), plain.body.toString('utf8'))
      }
    })

    it('codings the service does not offer get the body as it is', async () => {
      const answer = await send(
        server,
        LIST_100,
        authorized(server, { 'accept-encoding': 'deflate' }),
      )
      assert.equal(answer.status, 200)
      assert.equal(answer.headers['content-encoding'], undefined)
      assert.equal((JSON.parse(answer.body.toString('utf8')) as unknown[]).length, 100)
    })

    it('a body under the threshold goes as it is', async () => {
      const answer = await send(
        server,
        '/v1/pets?limit=2',
        authorized(server, { 'accept-encoding': 'gzip, br' }),
      )
      assert.equal(answer.status, 200)
      assert.ok(answer.body.length < COMPRESSION_THRESHOLD_BYTES)
      assert.equal(answer.headers['content-encoding'], undefined)
      assert.equal(answer.headers['content-length'], String(answer.body.length))
    })

    it('an error goes as it is, even over the threshold', async () => {
      // Every unknown field is named in the message (D6), which takes it over 1 KiB.
      const unknown = Object.fromEntries(
        Array.from({ length: 60 }, (_, i) => [`an_unknown_field_number_${i}`, i]),
      )
      const answer = await send(
        server,
        '/v1/pets',
        authorized(server, { 'accept-encoding': 'gzip, br', 'content-type': 'application/json' }),
        'POST',
        JSON.stringify({ name: 'Rex', categoryId: 1, ...unknown }),
      )
      assert.equal(answer.status, 400)
      assert.ok(answer.body.length > COMPRESSION_THRESHOLD_BYTES, `${answer.body.length} bytes`)
      assert.equal(answer.headers['content-encoding'], undefined)
      assert.equal(JSON.parse(answer.body.toString('utf8')).code, 'invalid_request')
    })

    it('one pet, the largest there can be, is under the threshold: createPet and getPet never compress', async () => {
      // 200 code points of four UTF-8 bytes each, the longest status, the largest ids.
      const newPet = {
        name: '\u{1F600}'.repeat(NAME_MAX_LENGTH),
        categoryId: MAX_ID,
        status: 'available',
      }
      const headers = authorized(server, {
        'accept-encoding': 'gzip, br',
        'content-type': 'application/json',
      })
      const created = await send(server, '/v1/pets', headers, 'POST', JSON.stringify(newPet))
      assert.equal(created.status, 201)
      const { id } = JSON.parse(created.body.toString('utf8')) as { id: number }
      const fetched = await send(server, `/v1/pets/${id}`, headers)
      const idDigitsToSpare = String(MAX_ID).length - String(id).length
      for (const answer of [created, fetched]) {
        assert.equal(answer.headers['content-encoding'], undefined)
        assert.ok(answer.body.length + idDigitsToSpare < COMPRESSION_THRESHOLD_BYTES)
      }
    })

    it('HEAD gets the headers of the body as it is, and no body', async () => {
      const plain = await send(server, LIST_100, authorized(server))
      const answer = await send(
        server,
        LIST_100,
        authorized(server, { 'accept-encoding': 'gzip, br' }),
        'HEAD',
      )
      assert.equal(answer.status, 200)
      assert.equal(answer.headers['content-encoding'], undefined)
      assert.equal(answer.headers['content-length'], String(plain.body.length))
      assert.equal(answer.body.length, 0)
    })

    it('a replayed create is byte-identical to the first answer, whatever the coding', async () => {
      for (const acceptEncoding of ['gzip, br', 'identity']) {
        const headers = authorized(server, {
          'accept-encoding': acceptEncoding,
          'content-type': 'application/json',
          'idempotency-key': `compression-${acceptEncoding.replace(/\W+/g, '-')}`,
        })
        const newPet = JSON.stringify({ name: 'R'.repeat(200), categoryId: 7 })
        const first = await send(server, '/v1/pets', headers, 'POST', newPet)
        const replay = await send(server, '/v1/pets', headers, 'POST', newPet)
        assert.equal(first.status, 201)
        assert.equal(replay.status, 201)
        assert.equal(replay.headers['idempotent-replayed'], 'true')
        assert.equal(replay.headers['content-encoding'], first.headers['content-encoding'])
        assert.deepEqual(replay.body, first.body)
      }
    })
  })

  describe('the OpenAPI document', () => {
    it('has a strong ETag and no-cache, and a matching If-None-Match gets a 304 without a body', async () => {
      const first = await send(server, '/v1/openapi.json')
      assert.equal(first.status, 200)
      const etag = String(first.headers.etag)
      assert.match(etag, /^"[\w-]+"$/, 'a strong ETag')
      assert.equal(first.headers['cache-control'], 'no-cache')

      const again = await send(server, '/v1/openapi.json')
      assert.equal(again.headers.etag, etag, 'the same document has the same tag')

      for (const ifNoneMatch of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
        const cached = await send(server, '/v1/openapi.json', { 'if-none-match': ifNoneMatch })
        assert.equal(cached.status, 304, `If-None-Match: ${ifNoneMatch}`)
        assert.equal(cached.body.length, 0)
        assert.equal(cached.headers.etag, etag)
        assert.equal(cached.headers['cache-control'], 'no-cache')
        assert.equal(cached.headers['content-encoding'], undefined)
      }
      const stale = await send(server, '/v1/openapi.json', { 'if-none-match': '"stale"' })
      assert.equal(stale.status, 200)
      assert.deepEqual(stale.body, first.body)
    })

    it('compressed, its ETag names the coding, and that tag gets a 304 too', async () => {
      const plain = await send(server, '/v1/openapi.json')
      for (const coding of ['gzip', 'br']) {
        const answer = await send(server, '/v1/openapi.json', { 'accept-encoding': coding })
        assert.equal(answer.headers['content-encoding'], coding)
        assert.equal(answer.headers.etag, `${String(plain.headers.etag).slice(0, -1)}-${coding}"`)
        assert.equal(decoded(answer), plain.body.toString('utf8'))
        const cached = await send(server, '/v1/openapi.json', {
          'accept-encoding': coding,
          'if-none-match': String(answer.headers.etag),
        })
        assert.equal(cached.status, 304)
        assert.equal(cached.body.length, 0)
        assert.equal(cached.headers.etag, answer.headers.etag)
      }
    })

    it('/docs/json is the same document with the same tag', async () => {
      const served = await send(server, '/v1/openapi.json')
      const page = await send(server, '/docs/json')
      assert.equal(page.headers.etag, served.headers.etag)
      assert.deepEqual(page.body, served.body)
      const cached = await send(server, '/docs/json', {
        'if-none-match': String(served.headers.etag),
      })
      assert.equal(cached.status, 304)
    })
  })

  describe('the /docs page', () => {
    async function assetUrls(): Promise<string[]> {
      const page = await send(server, '/docs')
      assert.equal(page.status, 200)
      const html = page.body.toString('utf8')
      return [...html.matchAll(/(?:src|href)="([^"]*\/static\/[^"]+)"/g)].map(
        ([, url]) => url ?? '',
      )
    }

    it('names its files with a version, which browsers may keep for a year', async () => {
      const urls = await assetUrls()
      assert.ok(
        urls.some((url) => url.includes('swagger-ui-bundle.js')),
        urls.join(', '),
      )
      for (const url of urls) {
        assert.match(url, /\?v=[\w-]+$/, `${url} has no version`)
        const answer = await send(server, url, { 'accept-encoding': 'gzip, br' })
        assert.equal(answer.status, 200, url)
        assert.equal(answer.headers['cache-control'], VERSIONED_ASSET_CACHE_CONTROL, url)
        assert.ok(answer.headers.etag, `${url} has no ETag`)
      }
    })

    it('a file asked for without the current version is revalidated', async () => {
      for (const url of [
        '/docs/static/swagger-ui-bundle.js',
        '/docs/static/swagger-ui.css?v=old',
      ]) {
        const answer = await send(server, url)
        assert.equal(answer.status, 200)
        assert.equal(answer.headers['cache-control'], 'no-cache')
      }
    })

    it('the large files go compressed, and a matching If-None-Match gets a 304', async () => {
      const bundle = (await assetUrls()).find((url) => url.includes('swagger-ui-bundle.js')) ?? ''
      const plain = await send(server, bundle)
      const answer = await send(server, bundle, { 'accept-encoding': 'br' })
      assert.equal(answer.headers['content-encoding'], 'br')
      assert.ok(answer.body.length < plain.body.length / 3)
      assert.deepEqual(brotliDecompressSync(answer.body), plain.body)
      const cached = await send(server, bundle, {
        'accept-encoding': 'br',
        'if-none-match': String(answer.headers.etag),
      })
      assert.equal(cached.status, 304)
      assert.equal(cached.body.length, 0)
      assert.equal(cached.headers['cache-control'], VERSIONED_ASSET_CACHE_CONTROL)
    })

    it('swagger-ui’s files are compressed once per coding, then sent as kept, with their length', async () => {
      const bundle = (await assetUrls()).find((url) => url.includes('swagger-ui-bundle.js')) ?? ''
      const plain = await send(server, bundle)
      for (const coding of ['br', 'gzip'] as const) {
        const first = await send(server, bundle, { 'accept-encoding': coding })
        // Sequential and at once: none of these compresses the bundle again.
        const again = [await send(server, bundle, { 'accept-encoding': coding })]
        again.push(
          ...(await Promise.all(
            [1, 2, 3].map(() => send(server, bundle, { 'accept-encoding': coding })),
          )),
        )
        for (const answer of [first, ...again]) {
          assert.equal(answer.status, 200)
          assert.equal(answer.headers['content-encoding'], coding)
          assert.equal(answer.headers['content-length'], String(answer.body.length))
          assert.deepEqual(answer.body, first.body, 'the same kept bytes every time')
        }
        assert.equal(decoded(first), plain.body.toString('utf8'))
        // Counted for the whole process (the test files share it): whoever asked first, once.
        assert.equal(docsFileCompressions('swagger-ui-bundle.js', coding), 1, coding)
      }
    })

    it('every file of swagger-ui’s goes in the coding it went in before, HEAD with the same headers', async () => {
      const folder = join(
        dirname(fileURLToPath(import.meta.resolve('@fastify/swagger-ui'))),
        'static',
      )
      // index.html is not served: swagger-ui's own route sends it to the page.
      for (const name of readdirSync(folder).filter((file) => file !== 'index.html')) {
        const url = `${DOCS_PREFIX}/static/${name}`
        const plain = await send(server, url)
        const answer = await send(server, url, { 'accept-encoding': 'gzip, br' })
        const head = await send(server, url, { 'accept-encoding': 'gzip, br' }, 'HEAD')
        assert.equal(answer.status, 200, name)
        if (name.endsWith('.png')) {
          assert.equal(answer.headers['content-encoding'], undefined, name)
        } else {
          assert.equal(answer.headers['content-encoding'], 'br', name)
          assert.match(String(answer.headers.vary), /accept-encoding/, name)
        }
        assert.equal(answer.headers['content-length'], String(answer.body.length), name)
        assert.equal(decoded(answer), plain.body.toString('utf8'), name)
        assert.equal(
          answer.headers.etag,
          plain.headers.etag,
          `${name}: one weak tag for all codings`,
        )
        assert.equal(head.body.length, 0)
        for (const header of [
          'content-encoding',
          'content-length',
          'etag',
          'vary',
          'content-type',
        ]) {
          assert.equal(head.headers[header], answer.headers[header], `${name}: HEAD's ${header}`)
        }
      }
    })

    it('picks the coding the plugin picks for the same Accept-Encoding', async () => {
      const bundle = `${DOCS_PREFIX}/static/swagger-ui-bundle.js`
      for (const acceptEncoding of [
        '',
        'identity',
        'gzip',
        'br',
        'BR',
        'gzip, deflate, br',
        'gzip, br',
        'br;q=0.5, gzip',
        'br;q=0, gzip;q=0.1',
        'br;q=0.5, gzip;q=0.5',
        'gzip;q=0.5, br;q=0.5',
        'gzip;q=1.0, br;q=0.9',
        'br ; q=1',
        'br;q=0',
        'x-gzip',
        '*',
        'gzip;q=0, *',
        'deflate',
        'identity;q=0',
      ]) {
        const byPlugin = await send(server, '/v1/openapi.json', {
          'accept-encoding': acceptEncoding,
        })
        const kept = await send(server, bundle, { 'accept-encoding': acceptEncoding })
        assert.equal(
          kept.headers['content-encoding'],
          byPlugin.headers['content-encoding'],
          `Accept-Encoding: ${acceptEncoding}`,
        )
      }
    })

    it('a range, x-no-compression and a matching If-None-Match get the file as before', async () => {
      const bundle = `${DOCS_PREFIX}/static/swagger-ui-bundle.js`
      const plain = await send(server, bundle)
      const range = await send(server, bundle, { 'accept-encoding': 'br', range: 'bytes=0-99' })
      assert.equal(range.status, 206)
      assert.equal(range.headers['content-encoding'], undefined)
      assert.deepEqual(range.body, plain.body.subarray(0, 100))
      const asIs = await send(server, bundle, { 'accept-encoding': 'br', 'x-no-compression': '1' })
      assert.equal(asIs.headers['content-encoding'], undefined)
      assert.deepEqual(asIs.body, plain.body)
      const cached = await send(server, bundle, {
        'accept-encoding': 'gzip',
        'if-none-match': String(plain.headers.etag),
      })
      assert.equal(cached.status, 304)
      assert.equal(cached.body.length, 0)
    })

    it('a file that does not exist is a 404 that no one keeps', async () => {
      const [versioned] = await assetUrls()
      const missing = (versioned ?? '').replace(/\/static\/[^?]+/, '/static/no-such-file.js')
      const answer = await send(server, missing)
      assert.equal(answer.status, 404)
      assert.notEqual(answer.headers['cache-control'], VERSIONED_ASSET_CACHE_CONTROL)
      assert.equal(JSON.parse(answer.body.toString('utf8')).code, 'not_found')
    })

    it('the page itself is revalidated with its ETag', async () => {
      const page = await send(server, '/docs')
      assert.equal(page.headers['cache-control'], 'no-cache')
      const etag = String(page.headers.etag)
      assert.match(etag, /^"[\w-]+"$/)
      const cached = await send(server, '/docs', { 'if-none-match': etag })
      assert.equal(cached.status, 304)
      assert.equal(cached.body.length, 0)
    })
  })
})
