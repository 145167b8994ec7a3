// The interactive reference at /docs: swagger-ui from local assets (no CDN), under its own CSP,
// titled as ours. Its files change only with a build, so the page names them with a version
// (`?v=<hash of what they are made from>`) that browsers may keep for a year, and the page
// itself and the document are revalidated with their ETags. swagger-ui's files are compressed once
// per coding and kept (D26).
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { Readable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import swaggerUi, { type FastifySwaggerUiOptions } from '@fastify/swagger-ui'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { CompressedFiles } from '../compressed-files.ts'
import {
  DOCUMENT_CACHE_CONTROL,
  etagsOf,
  type FixedBody,
  matchingEtag,
  sendFixedBody,
  strongEtag,
} from '../conditional-get.ts'
import { type ContentCoding, negotiatedCoding, varyOnAcceptEncoding } from './compression.ts'
import { htmlSecurityHeaders } from './security.ts'

export const DOCS_PREFIX = '/docs'
export const DOCS_TITLE = 'Petstore API reference'
/** Versioned files are the same bytes for as long as their URL exists (RFC 8246). */
export const VERSIONED_ASSET_CACHE_CONTROL = 'public, max-age=31536000, immutable'
/** The page, and files asked for without the current version, are revalidated every time. */
export const REVALIDATE = 'no-cache'

/** Our icon, in place of swagger-ui's: a "P" on the page's green. */
const FAVICON = {
  filename: 'petstore.svg',
  rel: 'icon',
  type: 'image/svg+xml',
  sizes: 'any',
  content:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#2f6f4f"/><path d="M11 25V7h6.5a5.5 5.5 0 0 1 0 11H15v7z M15 11v3.5h2.5a1.75 1.75 0 0 0 0-3.5z" fill="#fff" fill-rule="evenodd"/></svg>',
}

/** The React and component lookup of swagger-ui's plugin system, as far as the plugin uses them. */
interface UiSystem {
  React: {
    createElement(type: unknown, props?: object | null, ...children: unknown[]): unknown
    Fragment: unknown
  }
  getComponent(name: string, container?: boolean): unknown
}

interface InfoProps {
  getComponent(name: string, container?: boolean): unknown
}

/**
 * A swagger-ui plugin, run in the browser: @fastify/swagger-ui writes its source into
 * swagger-initializer.js (a file of our origin, so the CSP needs nothing new), hence no outside
 * names: values are written out. The document's introduction (info.description) is some
 * 1,300 px of prose that pushed the operations off the first screen; the page shows its first
 * paragraph and puts the rest, word for word, in a <details> named by its paragraphs' bold heads,
 * the way API references fold a long introduction. The document itself is unchanged.
 */
function petstorePagePlugin(system: UiSystem) {
  const h = system.React.createElement

  function CollapsedDescription({ source }: { source?: unknown }) {
    const Markdown = system.getComponent('Markdown', true)
    const cut = typeof source === 'string' ? source.indexOf('\n\n') : -1
    if (typeof source !== 'string' || cut < 0) return h(Markdown, { source })
    const rest = source.slice(cut + 2)
    const heads = rest
      .split('\n\n')
      .filter((paragraph) => paragraph.startsWith('**') && paragraph.indexOf('.**') > 2)
      .map((paragraph) => paragraph.slice(2, paragraph.indexOf('.**')))
    return h(
      system.React.Fragment,
      null,
      h(Markdown, { source: source.slice(0, cut) }),
      h(
        'details',
        { className: 'petstore-introduction' },
        h('summary', null, heads.length > 0 ? heads.join(' · ') : 'More about this API'),
        h(Markdown, { source: rest }),
      ),
    )
  }

  return {
    wrapComponents: {
      // The link under the title: the service's own document (OPENAPI_PATH of plugins/openapi.ts,
      // which imports this file), not /docs/json, which serves the same bytes for this page only.
      InfoUrl: (Original: unknown) => (props: object) =>
        h(Original, { ...props, url: '/v1/openapi.json' }),
      // OpenAPI 3.1's info block. Its only Markdown is the description: ours takes its place
      // there, so the folded text sits right under the first paragraph. CollapsedDescription is
      // made once, not per render, so that React keeps the <details> (and whether it is open).
      OAS31Info: (Original: unknown) => (props: InfoProps) =>
        h(Original, {
          ...props,
          getComponent: (name: string, container?: boolean) =>
            name === 'Markdown' ? CollapsedDescription : props.getComponent(name, container),
        }),
    },
  }
}

/** The <details> above, styled from a file of our origin (the CSP refuses inline style). */
const PAGE_CSS = {
  filename: 'petstore.css',
  content: `.swagger-ui .info .petstore-introduction { margin: 0.5em 0 1em; }
.swagger-ui .info .petstore-introduction > summary {
  cursor: pointer;
  font-family: sans-serif;
  font-size: 14px;
  color: #3b4151;
}
.swagger-ui .info .petstore-introduction[open] > summary { margin-bottom: 1em; }
`,
}

const options = {
  routePrefix: DOCS_PREFIX,
  theme: { title: DOCS_TITLE, favicon: [FAVICON], css: [PAGE_CSS] },
  // Every asset is local. Unlike swagger-ui's default CSP (`staticCSP: true`), no
  // `upgrade-insecure-requests`: over plain HTTP on any host but localhost it turned the
  // assets' URLs into https ones, and the page stayed blank. No 'unsafe-inline' either: the
  // page has no inline script or style (see the layout below).
  staticCSP: {
    'default-src': ["'self'"],
    'base-uri': ["'self'"],
    'font-src': ["'self'", 'data:'],
    'frame-ancestors': ["'self'"],
    'img-src': ["'self'", 'data:'],
    'object-src': ["'none'"],
    'script-src': ["'self'"],
    'script-src-attr': ["'none'"],
    'style-src': ["'self'"],
  },
  uiConfig: {
    // BaseLayout: the document's own title, the Authorize button and the operations. The
    // default StandaloneLayout adds a top bar with swagger-ui's logo (an SVG whose <style> our
    // CSP refuses, a console error), which the plugin then swaps for Fastify's.
    layout: 'BaseLayout',
    deepLinking: true,
    defaultModelsExpandDepth: 1,
    // In place of the initializer's list: its one plugin (DownloadUrl) is in swagger-ui's
    // base preset already.
    plugins: [petstorePagePlugin],
  },
} satisfies FastifySwaggerUiOptions

const SWAGGER_UI_DIR = dirname(fileURLToPath(import.meta.resolve('@fastify/swagger-ui')))
/** The folder @fastify/swagger-ui serves under /docs/static/ (through @fastify/static). */
const SWAGGER_UI_STATIC_DIR = join(SWAGGER_UI_DIR, 'static')

/**
 * swagger-ui's files, compressed once per coding for the whole process, whatever the number of
 * apps in it (D26; ../compressed-files.ts).
 */
const swaggerUiFiles = new CompressedFiles(SWAGGER_UI_STATIC_DIR)

/** How many times this process has compressed one of swagger-ui's files in `coding`. */
export function docsFileCompressions(name: string, coding: ContentCoding): number {
  return swaggerUiFiles.compressions(name, coding)
}

/**
 * What the page's files are made from: swagger-ui's files, its version, and our options (the
 * page and swagger-initializer.js are generated from them). Any change gives new URLs.
 */
function assetVersion(): string {
  const hash = createHash('sha256')
  hash.update(readFileSync(join(SWAGGER_UI_DIR, 'package.json')))
  // With the plugin's source: JSON.stringify alone would drop functions.
  hash.update(
    JSON.stringify(options, (_key, value: unknown) =>
      typeof value === 'function' ? String(value) : value,
    ),
  )
  for (const name of readdirSync(SWAGGER_UI_STATIC_DIR).sort()) {
    hash.update(name).update(readFileSync(join(SWAGGER_UI_STATIC_DIR, name)))
  }
  return hash.digest('base64url').slice(0, 16)
}

type OnSendDone = (err: null, payload: unknown) => void

export const docsPage: FastifyPluginAsync<{ document: () => FixedBody }> = async (
  app,
  { document },
) => {
  const version = assetVersion()
  const assetPrefix = `${DOCS_PREFIX}/static/`
  const pageUrls = new Set([DOCS_PREFIX, `${DOCS_PREFIX}/`])

  // D13: the one HTML page keeps helmet's whole set, over the API's shorter one; swagger-ui's
  // own onSend then replaces the CSP with the page's (staticCSP above).
  const htmlHeaders = htmlSecurityHeaders()
  app.addHook('onRequest', (_request, reply, done) => {
    reply.headers(htmlHeaders)
    done()
  })

  await app.register(swaggerUi, {
    ...options,
    uiHooks: {
      // The page loads the document from /docs/json: the bytes and ETag of /v1/openapi.json.
      onRequest: async (request, reply) => {
        if (request.routeOptions.url !== `${DOCS_PREFIX}/json`) return
        return sendFixedBody(
          request,
          reply,
          document(),
          'application/json; charset=utf-8',
          DOCUMENT_CACHE_CONTROL,
        )
      },
    },
  })

  // Hooks of this scope: the /docs routes only, @fastify/static's included.
  app.addHook('onSend', (request, reply, payload, done: OnSendDone) => {
    const url = request.routeOptions.url ?? ''
    if (url.startsWith(assetPrefix) && (reply.statusCode === 200 || reply.statusCode === 304)) {
      // A 304 says for how long too (RFC 9111 §4.3.4), so both get it.
      const versioned = new URLSearchParams(request.url.split('?')[1]).get('v') === version
      reply.header('cache-control', versioned ? VERSIONED_ASSET_CACHE_CONTROL : REVALIDATE)
    }
    if (reply.statusCode !== 200) return done(null, payload)
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', REVALIDATE)
    let body = payload
    if (pageUrls.has(url) && typeof payload === 'string') {
      body = versionAssetUrls(payload, version)
    }
    done(null, withEtag(request, reply, body))
  })
  app.addHook('onSend', keptCoding)
}

/** @fastify/static's route for swagger-ui's files. */
const STATIC_FILES_ROUTE = `${DOCS_PREFIX}/static/*`

/**
 * The types of swagger-ui's files that @fastify/compress compresses (its rule reads mime-db, which
 * is not ours to import): scripts, style sheets, HTML, JSON and SVG. Its PNGs go as they are.
 */
const COMPRESSIBLE_TYPE = /^(?:text\/|application\/(?:javascript|json)|image\/svg\+xml)/

/**
 * A file of swagger-ui's (GET or HEAD, 200) goes in the coding the client asks for from
 * swaggerUiFiles, compressed once (D26); the plugin compresses none of them, through its
 * documented opt-out, so no request makes the service compress one again. The headers stay
 * @fastify/static's (its weak ETag holds for every coding, RFC 9110 §8.8.1), with the coding,
 * Vary and the compressed length, which a compressed stream could not say before. Ranges (206)
 * and 304s go as they did.
 */
async function keptCoding(
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
): Promise<unknown> {
  if (request.routeOptions.url !== STATIC_FILES_ROUTE || reply.statusCode !== 200) return payload
  const coding = codingFor(request, reply)
  // The plugin's opt-out, whatever goes: it never compresses one of these files itself.
  request.headers['x-no-compression'] = '1'
  if (coding === undefined) return payload
  const name = fileName(request)
  let bytes: Buffer
  try {
    bytes = await swaggerUiFiles.compressed(name, coding)
  } finally {
    // @fastify/static's stream of the file as it is, opened but not read.
    if (payload instanceof Readable) payload.destroy()
  }
  varyOnAcceptEncoding(reply)
  reply.header('content-encoding', coding).header('content-length', bytes.length)
  return bytes
}

/** The coding to send: none when the client asks for none (or says x-no-compression itself). */
function codingFor(request: FastifyRequest, reply: FastifyReply): ContentCoding | undefined {
  if (request.headers['x-no-compression'] !== undefined) return undefined
  if (!COMPRESSIBLE_TYPE.test(String(reply.getHeader('content-type') ?? ''))) return undefined
  // Only names the folder has: another spelling @fastify/static may accept goes as it is.
  if (!swaggerUiFiles.has(fileName(request))) return undefined
  return negotiatedCoding(request.headers['accept-encoding'])
}

/** The file the static route was asked for, by the name in its folder. */
function fileName(request: FastifyRequest): string {
  return (request.params as { '*'?: string })['*'] ?? ''
}

/**
 * Every quoted URL of the page's own assets gets `?v=<version>`, so a new release is fetched
 * anew. Cut at the quotes rather than searched for with one pattern: a search that may start
 * anywhere and run to the end of a path is quadratic in the path (test/redos.test.ts).
 */
function versionAssetUrls(page: string, version: string): string {
  const parts = page.split('"')
  return parts
    .map((part, i) =>
      i < parts.length - 1 && part.includes('/static/') && ASSET_PATH.test(part)
        ? `${part}?v=${version}`
        : part,
    )
    .join('"')
}

const ASSET_PATH = /^[\w./-]+$/

/**
 * Generated bodies (the page, swagger-initializer.js) get a strong ETag of their bytes; files
 * keep @fastify/static's, which it already answers 304 for. A matching If-None-Match: 304.
 */
function withEtag(request: FastifyRequest, reply: FastifyReply, body: unknown): unknown {
  if (typeof body !== 'string' || reply.hasHeader('etag')) return body
  const etag = strongEtag(body)
  reply.header('vary', 'accept-encoding')
  const held = matchingEtag(request.headers['if-none-match'], etagsOf(etag))
  if (held === undefined) {
    reply.header('etag', etag)
    return body
  }
  reply.code(304).header('etag', held).removeHeader('content-type')
  return null
}
