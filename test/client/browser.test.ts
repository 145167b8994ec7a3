// D18: the built client in a real Chromium, on a page of another origin than the service's
// (CORS on, D13): create with an Idempotency-Key, list across pages by the exposed Link, get,
// and an error with its request id and rate-limit state, all read through CORS.
//
// Needs Debian's Chromium at /usr/bin/chromium. Without it the test is skipped, unless
// PETSTORE_REQUIRE_BROWSER=1 (CI), where a missing browser is a failure.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { once } from 'node:events'
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import { join, normalize } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { type Browser, chromium } from 'playwright-core'
import type { Pet, PetstoreError } from '../../client/src/index.ts'
import { startServer, type TestServer, tempDir } from '../helpers/server.ts'

const CHROMIUM = '/usr/bin/chromium'
const chromiumPresent = existsSync(CHROMIUM)
const browserRequired = process.env.PETSTORE_REQUIRE_BROWSER === '1'
const TSC = fileURLToPath(new URL('../../node_modules/typescript/bin/tsc', import.meta.url))
const CLIENT_TSCONFIG = fileURLToPath(new URL('../../client/tsconfig.json', import.meta.url))

/** Serves the built client and an empty page: the web application's own origin. */
async function serveFiles(dir: string): Promise<{ origin: string; server: Server }> {
  const server = createServer(async (request, response) => {
    const path = normalize(new URL(request.url ?? '/', 'http://x').pathname)
    if (path === '/') {
      response
        .writeHead(200, { 'content-type': 'text/html' })
        .end('<!doctype html><title>app</title>')
      return
    }
    try {
      const body = await readFile(join(dir, path))
      response.writeHead(200, { 'content-type': 'text/javascript' }).end(body)
    } catch {
      response.writeHead(404).end()
    }
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  return { origin: `http://127.0.0.1:${address.port}`, server }
}

if (!chromiumPresent) {
  test('the client in a browser', (t) => {
    if (!browserRequired) {
      t.skip(`Chromium is absent (${CHROMIUM}), so the client is not tested in a browser`)
      return
    }
    assert.fail(`Chromium is required (PETSTORE_REQUIRE_BROWSER=1) but ${CHROMIUM} does not exist`)
  })
} else {
  describe('the client in a browser', { timeout: 60_000 }, () => {
    let dir: Awaited<ReturnType<typeof tempDir>>
    let files: Awaited<ReturnType<typeof serveFiles>>
    let service: TestServer
    let browser: Browser

    before(async () => {
      dir = await tempDir()
      // Its own build: the pack test rebuilds client/dist meanwhile.
      await promisify(execFile)(process.execPath, [
        TSC,
        '-p',
        CLIENT_TSCONFIG,
        '--outDir',
        dir.path,
      ])
      files = await serveFiles(dir.path)
      service = await startServer({ corsOrigins: [files.origin], rateLimit: 100 })
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
      })
    })
    after(async () => {
      await browser?.close()
      await service?.close()
      files?.server.close()
      await dir?.remove()
    })

    test('creates, pages, gets and reads errors across origins', async () => {
      const page = await browser.newPage()
      // A guard, not a wait: the browser shares two cores with every other test run.
      page.setDefaultTimeout(30_000)
      await page.goto(`${files.origin}/`)
      const result = await page.evaluate(
        async ({ baseUrl, apiKey, moduleUrl }) => {
          // The build in the page; its types are the sources'.
          const client: typeof import('../../client/src/index.ts') = await import(moduleUrl)
          const { Petstore, PetstoreError } = client
          const petstore = new Petstore({ baseUrl, apiKey })
          const made: Pet[] = []
          for (const name of ['Ada', 'Bea', 'Cy']) {
            made.push(await petstore.pets.create({ name, categoryId: 1, status: 'pending' }))
          }
          const again = await petstore.pets.create(
            { name: 'Ada', categoryId: 1, status: 'pending' },
            { idempotencyKey: 'browser-1' },
          )
          const replayed = await petstore.pets.create(
            { name: 'Ada', categoryId: 1, status: 'pending' },
            { idempotencyKey: 'browser-1' },
          )
          const listed: number[] = []
          for await (const pet of petstore.pets.list({ status: 'pending', limit: 1 })) {
            listed.push(pet.id)
          }
          // getPet is deprecated (D7); the client still reaches it until the sunset.
          const one = await petstore.pets.get(made[0]?.id ?? 0)
          let error: Partial<Pick<PetstoreError, 'status' | 'code' | 'requestId' | 'rateLimit'>> =
            {}
          try {
            await petstore.pets.get(987654)
          } catch (err) {
            if (err instanceof PetstoreError) {
              error = {
                status: err.status,
                code: err.code,
                requestId: err.requestId,
                rateLimit: err.rateLimit,
              }
            }
          }
          return { made, again, replayed, listed, one, error }
        },
        {
          baseUrl: `${service.url}/v1`,
          apiKey: service.key,
          moduleUrl: `${files.origin}/index.js`,
        },
      )
      assert.equal(result.replayed.id, result.again.id)
      assert.deepEqual(
        result.listed,
        [...result.made, result.again].map((pet) => pet.id),
      )
      assert.deepEqual(result.one, result.made[0])
      assert.equal(result.error.status, 404)
      assert.equal(result.error.code, 'not_found')
      assert.match(result.error.requestId ?? '', /.+/)
      assert.equal(typeof result.error.rateLimit?.remaining, 'number')
      await page.close()
    })
  })
}
