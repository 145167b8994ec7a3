// The interactive reference at /docs, in a real Chromium: it lists the three operations, shows
// getPet as deprecated, loads nothing from any other host (no CDN), reports nothing on the
// console under its CSP, shows the operations on the first screen with the whole introduction
// folded above them, links the service's document, is titled as ours, shows our examples, and
// works.
//
// The page is costly to load (swagger-ui's bundle), so it is loaded once at the server's own
// origin for the read-only checks, in order, then "Try it out" on the same page; the host name
// needs a page of its own: two loads in all.
//
// Needs Debian's Chromium at /usr/bin/chromium. Without it the suite is skipped, unless
// PETSTORE_REQUIRE_BROWSER=1 (CI), where a missing browser is a failure.
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { after, before, describe, test } from 'node:test'
import { type Browser, chromium, type Locator, type Page } from 'playwright-core'
import { errorCatalog } from '../src/errors.ts'
import { DOCS_TITLE } from '../src/http/plugins/docs-page.ts'
import { OPENAPI_PATH } from '../src/http/plugins/openapi.ts'
import { startServer, type TestServer } from './helpers/server.ts'

const CHROMIUM = '/usr/bin/chromium'
const chromiumPresent = existsSync(CHROMIUM)
const browserRequired = process.env.PETSTORE_REQUIRE_BROWSER === '1'

/** A name that is neither localhost nor 127.0.0.1, resolved to 127.0.0.1 inside the browser. */
const HOST_NAME = 'petstore.test'

/** A laptop's browser window: what a new reader sees before scrolling. */
const WINDOW = { width: 1280, height: 800 }

interface OpenedPage {
  page: Page
  /** Every URL the page requested. */
  requests: string[]
  /** Uncaught exceptions in the page. */
  errors: string[]
  /** Errors on the console: CSP violations, failed loads, React's complaints. */
  consoleErrors: string[]
}

interface ShownOperation {
  id: string
  method: string
  path: string | null
  summary: string
  deprecated: boolean
}

if (!chromiumPresent) {
  test('the /docs page', (t) => {
    if (!browserRequired) {
      t.skip(`Chromium is absent (${CHROMIUM}), so the /docs page is not tested`)
      return
    }
    assert.fail(
      `Chromium is required (PETSTORE_REQUIRE_BROWSER=1) but ${CHROMIUM} does not exist; install it with apt-get install chromium`,
    )
  })
} else {
  describe('the /docs page', docsPageTests)
}

function docsPageTests() {
  let server: TestServer
  let browser: Browser

  before(async () => {
    server = await startServer({ rateLimit: 100 })
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        `--host-resolver-rules=MAP ${HOST_NAME} 127.0.0.1`,
      ],
    })
  })

  after(async () => {
    await browser?.close()
    await server?.close()
  })

  /** Opens `${origin}/docs` and waits until swagger-ui has rendered the operations. */
  async function openDocs(origin: string): Promise<OpenedPage> {
    const page = await browser.newPage({ viewport: WINDOW })
    // A guard, not a wait: swagger-ui's bundle is parsed in a browser that shares two cores with
    // every other test run (npm test runs three at once), so a slow moment must not fail a check.
    page.setDefaultTimeout(60_000)
    const requests: string[] = []
    const errors: string[] = []
    const consoleErrors: string[] = []
    page.on('request', (request) => requests.push(request.url()))
    page.on('pageerror', (error) => errors.push(error.message))
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text())
    })
    await page.goto(`${origin}/docs`)
    // swagger-ui renders one .opblock per operation, all at once, once the document has loaded.
    await page.locator('.opblock').nth(2).waitFor()
    await page.waitForLoadState('networkidle')
    return { page, requests, errors, consoleErrors }
  }

  /**
   * An operation's block, opened: its summary is clicked only when its body is not shown, since a
   * click on an opened one closes it (the page is shared, so an earlier test may have opened it).
   */
  async function openedOperation(page: Page, operationId: string): Promise<Locator> {
    const block = page.locator(`#operations-animals-${operationId}`)
    if (!(await block.locator('.responses-table').first().isVisible())) {
      await block.locator('.opblock-summary-control').click()
    }
    return block
  }

  /** The example a response of an operation shows, once the operation is opened. */
  async function shownExample(page: Page, operationId: string, status: string): Promise<unknown> {
    const block = await openedOperation(page, operationId)
    const row = block.locator(`.responses-table tr.response[data-code="${status}"]`)
    const text = await row
      .locator('.response-col_description .example pre, .response-col_description pre')
      .first()
      .textContent()
    return JSON.parse(text ?? 'null')
  }

  function shownOperations(page: Page): Promise<ShownOperation[]> {
    return page.locator('.opblock').evaluateAll((blocks) =>
      blocks.map((block) => ({
        // swagger-ui names each block operations-<tag>-<operationId>.
        id: block.id,
        method: block.querySelector('.opblock-summary-method')?.textContent?.trim() ?? '',
        path: block.querySelector('[data-path]')?.getAttribute('data-path') ?? null,
        summary: block.querySelector('.opblock-summary-description')?.textContent?.trim() ?? '',
        deprecated: block.classList.contains('opblock-deprecated'),
      })),
    )
  }

  /**
   * The text of the document's introduction (info.description, Markdown) as a reader sees it: one
   * string per paragraph, and one per table cell, without the Markdown marks.
   */
  async function introductionTexts(): Promise<string[]> {
    const response = await fetch(`${server.url}${OPENAPI_PATH}`)
    const document = (await response.json()) as { info: { description: string } }
    return document.info.description
      .split('\n\n')
      .flatMap((paragraph) =>
        paragraph.startsWith('|')
          ? paragraph.split('\n').flatMap((row) => row.split('|'))
          : [paragraph],
      )
      .map((text) => normalized(text.replaceAll('**', '').replaceAll('`', '')))
      .filter((text) => text !== '' && !/^-+$/.test(text))
  }

  /** The requests that went to a host other than `host` (data: and blob: URLs are not). */
  function elsewhere(requests: string[], host: string): string[] {
    return requests.filter((url) => {
      const { protocol, hostname } = new URL(url)
      return protocol !== 'data:' && protocol !== 'blob:' && hostname !== host
    })
  }

  describe('at the server’s own origin: one page, the checks in order, “Try it out” last', () => {
    let docs: OpenedPage

    before(async () => {
      docs = await openDocs(server.url)
    })

    after(async () => {
      await docs?.page.close()
    })

    test('lists exactly the three operations, getPet deprecated, from 127.0.0.1 only', async () => {
      const { page, requests, errors, consoleErrors } = docs
      assert.deepStrictEqual(await shownOperations(page), [
        {
          id: 'operations-animals-listPets',
          method: 'GET',
          path: '/pets',
          summary: 'List all animals',
          deprecated: false,
        },
        {
          id: 'operations-animals-createPet',
          method: 'POST',
          path: '/pets',
          summary: 'Add an animal',
          deprecated: false,
        },
        {
          id: 'operations-animals-getPet',
          method: 'GET',
          path: '/pets/{petId}',
          summary: 'Get an animal (deprecated)',
          deprecated: true,
        },
      ])
      assert.ok(
        requests.some((url) => new URL(url).pathname === '/docs/json'),
        `the page never loaded the document: ${requests.join(', ')}`,
      )
      assert.deepStrictEqual(elsewhere(requests, '127.0.0.1'), [], 'requests to other hosts')
      assert.deepStrictEqual(errors, [], 'uncaught errors in the page')
      assert.deepStrictEqual(consoleErrors, [], 'errors on the console (a CSP violation?)')
    })

    test('shows the three operations on the first screen of a 1280×800 window', async () => {
      const { page } = docs
      assert.deepStrictEqual(await page.viewportSize(), WINDOW)
      assert.equal(await page.evaluate('window.scrollY'), 0, 'the page opened scrolled')
      const blocks = await page
        .locator('.opblock')
        .evaluateAll((all) =>
          all.map((block) => ({ id: block.id, ...block.getBoundingClientRect().toJSON() })),
        )
      assert.equal(blocks.length, 3)
      for (const block of blocks) {
        // Its whole summary row (method, path, summary), not just its top edge.
        assert.ok(
          block.top >= 0 && block.bottom <= WINDOW.height,
          `${block.id} is at ${block.top}–${block.bottom} px, not within the first ${WINDOW.height}`,
        )
      }
    })

    test('links the service’s own document under the title, not /docs/json', async () => {
      const { page } = docs
      const links = await page
        .locator('.information-container .info .main a')
        .evaluateAll((all) => all.map((link) => link.getAttribute('href')))
      assert.deepStrictEqual(links, [OPENAPI_PATH])
      const shown = page.locator('.information-container .info .main a')
      assert.ok(await shown.isVisible(), 'the link is not shown')
      assert.equal(normalized((await shown.textContent()) ?? ''), OPENAPI_PATH)
      assert.equal(
        await page.locator('.information-container a[href*="/docs/json"]').count(),
        0,
        'a link to /docs/json',
      )
      // What a reader gets who follows it: the document, without a key.
      const response = await fetch(new URL(OPENAPI_PATH, server.url))
      assert.equal(response.status, 200)
      assert.match(response.headers.get('content-type') ?? '', /^application\/json/)
    })

    test('keeps every word of the introduction, folded in a <details> the reader opens', async () => {
      const { page } = docs
      const info = page.locator('.information-container .info')
      const folded = info.locator('details')
      assert.equal(await folded.count(), 1)
      assert.equal(await folded.getAttribute('open'), null, 'the introduction is open on load')
      const shownText = normalized((await info.textContent()) ?? '')
      const texts = await introductionTexts()
      assert.ok(texts.length > 20, `too few paragraphs and cells: ${texts.length}`)
      for (const text of texts) {
        assert.ok(shownText.includes(text), `not on the page: ${text}`)
      }
      // The first paragraph stays shown; the sentence below it is there but folded away.
      assert.ok(await info.getByText(texts[0] ?? '').isVisible(), 'the first paragraph is hidden')
      const sentence = info.getByText('Keys are checked before anything else in the request.')
      assert.equal(await sentence.isVisible(), false, 'the long introduction is unfolded')
      await folded.locator('summary').click()
      assert.equal(await folded.getAttribute('open'), '')
      assert.ok(await sentence.isVisible(), 'opening the <details> does not show the text')
      // Folded again, for the checks that follow on this page.
      await folded.locator('summary').click()
      assert.equal(await folded.getAttribute('open'), null)
    })

    test('is titled as ours, without a framework’s logo', async () => {
      const { page } = docs
      assert.equal(await page.title(), DOCS_TITLE)
      // swagger-ui's top bar carries its logo, or the one the plugin puts there (Fastify's).
      assert.equal(await page.locator('.topbar').count(), 0, 'a top bar with a logo')
      assert.equal(await page.locator('img').count(), 0, 'an image on the page')
      const icons = await page
        .locator('link[rel="icon"]')
        .evaluateAll((links) => links.map((link) => link.getAttribute('href') ?? ''))
      assert.equal(icons.length, 1, icons.join(', '))
      assert.match(icons[0] ?? '', /\/static\/theme\/petstore\.svg\?v=/, 'our icon, versioned')
    })

    test('shows our examples: a 401 is unauthorized, a Pet is an animal', async () => {
      const { page } = docs
      assert.deepStrictEqual(await shownExample(page, 'listPets', '401'), {
        code: 'unauthorized',
        message: errorCatalog.unauthorized.example,
        status: 401,
      })
      assert.deepStrictEqual(await shownExample(page, 'listPets', '429'), {
        code: 'rate_limited',
        message: errorCatalog.rate_limited.example,
        status: 429,
      })
      const [first] = (await shownExample(page, 'listPets', '200')) as { name: string }[]
      assert.equal(first?.name, 'Rex')
      assert.deepStrictEqual(await shownExample(page, 'getPet', '404'), {
        code: 'not_found',
        message: errorCatalog.not_found.example,
        status: 404,
      })
    })

    test('“Try it out” calls listPets on this server with the key given to Authorize', async () => {
      const { page } = docs
      await page.locator('.btn.authorize').click()
      await page.locator('.modal-ux input').fill(server.key)
      await page.locator('.modal-ux .auth-btn-wrapper .authorize').click()
      await page.locator('.modal-ux .btn-done').click()

      // Opened already by the examples above when they ran; a click would close it again.
      const listPets = await openedOperation(page, 'listPets')
      await listPets.locator('.try-out__btn').click()
      const [request] = await Promise.all([
        page.waitForRequest((request) => new URL(request.url()).pathname === '/v1/pets'),
        listPets.locator('.execute').click(),
      ])
      assert.equal(request.headers().authorization, `Bearer ${server.key}`)
      assert.equal(new URL(request.url()).origin, server.url)
      const status = listPets
        .locator('.live-responses-table tr.response .response-col_status')
        .first()
      await status.waitFor()
      assert.equal((await status.textContent())?.trim(), '200')
    })

    test('after all that: still nothing uncaught, on the console, or from another host', () => {
      const { requests, errors, consoleErrors } = docs
      assert.deepStrictEqual(elsewhere(requests, '127.0.0.1'), [], 'requests to other hosts')
      assert.deepStrictEqual(errors, [], 'uncaught errors in the page')
      assert.deepStrictEqual(consoleErrors, [], 'errors on the console (a CSP violation?)')
    })
  })

  test('renders over plain HTTP under a host name too (no https upgrade of its assets)', async () => {
    const origin = `http://${HOST_NAME}:${new URL(server.url).port}`
    const { page, requests, errors, consoleErrors } = await openDocs(origin)
    try {
      assert.equal((await shownOperations(page)).length, 3)
      // Away from localhost swagger-ui would also load its validator badge from another host.
      assert.deepStrictEqual(elsewhere(requests, HOST_NAME), [], 'requests to other hosts')
      assert.deepStrictEqual(
        requests.filter((url) => !url.startsWith(`${origin}/`)),
        [],
        'requests not to the page’s own origin',
      )
      assert.deepStrictEqual(errors, [], 'uncaught errors in the page')
      // Over plain HTTP away from localhost, Chromium ignores helmet's Cross-Origin-Opener-Policy
      // (it needs a trustworthy origin) and says so on the console; over HTTPS it does not.
      assert.deepStrictEqual(
        consoleErrors.filter(
          (text) => !text.startsWith('The Cross-Origin-Opener-Policy header has been ignored'),
        ),
        [],
        'errors on the console (a CSP violation?)',
      )
    } finally {
      await page.close()
    }
  })
}

/** Text with its runs of white space made one space, as a browser lays it out. */
function normalized(text: string): string {
  return text.replaceAll(/\s+/g, ' ').trim()
}
