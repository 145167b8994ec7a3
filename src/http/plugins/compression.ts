// D26: gzip and brotli for successful answers over about 1 KiB, when the client accepts them
// (RFC 9110 §12.5.3), through the ecosystem's plugin, @fastify/compress. Register it before any
// route: it attaches itself to each route as the route is added.
import { promisify } from 'node:util'
import { brotliCompress, constants, gzip } from 'node:zlib'
import compress from '@fastify/compress'
import type { FastifyReply, onSendHookHandler, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'

/** Bodies smaller than this are sent as they are: a few hundred bytes saved are not worth it. */
export const COMPRESSION_THRESHOLD_BYTES = 1024

/**
 * Brotli at quality 3 (D26). zlib's default, 11, is made for files compressed once and costs a
 * request two hundred times what 3 does on a list of 100 pets; 3 costs what gzip does and is
 * smaller; 4 (the plugin's choice) saves a few per cent more for half as much CPU again
 * (docs/benchmarks.md, "Measurements behind choices in the code"; the script that measured it
 * is in the history of scripts/bench).
 */
export const BROTLI_QUALITY = 3

/** The plugin's brotli settings, and ours for what we compress ourselves (compressWhole). */
const BROTLI_OPTIONS = { params: { [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY } }

/** `"abc"` with the coding `br` is `"abc-br"`. */
export function codedEtag(etag: string, coding: string): string {
  return `${etag.slice(0, -1)}-${coding}"`
}

/** The content codings offered, most preferred first when the client weighs them equally. */
export const CONTENT_CODINGS = ['br', 'gzip'] as const

export type ContentCoding = (typeof CONTENT_CODINGS)[number]

/** How the plugin reads these tokens: `*` (any coding) and `x-gzip` as gzip. */
const CODING_ALIASES: Readonly<Record<string, ContentCoding>> = { '*': 'gzip', 'x-gzip': 'gzip' }

function isOffered(token: string): token is ContentCoding {
  return (CONTENT_CODINGS as readonly string[]).includes(token)
}

/** An element's weight: its `q` parameter, 1 without one, 0 when unreadable (RFC 9110 §12.4.2). */
function weightOf(parameters: string[]): number {
  for (const parameter of parameters) {
    const [name = '', value = ''] = parameter.split('=')
    if (name.trim() === 'q') return Number.parseFloat(value) || 0
  }
  return 1
}

/**
 * The coding the plugin would pick for this Accept-Encoding (RFC 9110 §12.5.3), for the bodies
 * we compress ourselves (D26): the highest weight among the codings we offer, the first of
 * CONTENT_CODINGS on a tie; none (the body as it is) when the client accepts neither.
 * test/http/compression.test.ts holds it to the plugin's choice.
 */
export function negotiatedCoding(acceptEncoding: string | undefined): ContentCoding | undefined {
  let chosen: ContentCoding | undefined
  let chosenWeight = 0
  for (const element of (acceptEncoding ?? '').toLowerCase().split(',')) {
    const [name = '', ...parameters] = element.split(';')
    const token = name.trim()
    const coding = CODING_ALIASES[token] ?? token
    const weight = weightOf(parameters)
    if (!isOffered(coding) || weight <= 0) continue
    const better =
      weight > chosenWeight ||
      (weight === chosenWeight &&
        chosen !== undefined &&
        CONTENT_CODINGS.indexOf(coding) < CONTENT_CODINGS.indexOf(chosen))
    if (better) {
      chosen = coding
      chosenWeight = weight
    }
  }
  return chosen
}

const brotliAsync = promisify(brotliCompress)
const gzipAsync = promisify(gzip)

/**
 * `body` in `coding`, with the plugin's settings, on libuv's pool rather than the event loop:
 * for bodies compressed once and kept (src/http/compressed-files.ts).
 */
export function compressWhole(body: Buffer, coding: ContentCoding): Promise<Buffer> {
  return coding === 'br' ? brotliAsync(body, BROTLI_OPTIONS) : gzipAsync(body)
}

/** `Vary: accept-encoding`, added to any Vary already set, as the plugin does. */
export function varyOnAcceptEncoding(reply: FastifyReply): void {
  const vary = reply.getHeader('vary')
  if (vary === undefined) reply.header('vary', 'accept-encoding')
  else if (!/accept-encoding/i.test(String(vary))) reply.header('vary', `${vary}, accept-encoding`)
}

/**
 * Only successful answers are compressed: errors are small and carry what the client sent, and
 * a client must not make the service spend compression on answers to its garbage (D16); a 304
 * has no body. Any other status opts out through the plugin's documented `x-no-compression`
 * request header, set just before the plugin's own hook runs.
 */
const onlySuccessfulAnswers: onSendHookHandler = (request, reply, payload, done) => {
  const status = reply.statusCode
  if (status < 200 || status >= 300) request.headers['x-no-compression'] = '1'
  done(null, payload)
}

/**
 * A strong ETag names one sequence of bytes (RFC 9110 §8.8.3), and a compressed body is another
 * one: it gets the coding appended, `"<tag>-gzip"`, as Apache httpd does. Weak tags
 * (@fastify/static's) stay: every coding of a representation is equivalent under them. Runs
 * just after the plugin's hook.
 */
const codedEtags: onSendHookHandler = (_request, reply, payload, done) => {
  const coding = reply.getHeader('content-encoding')
  const etag = reply.getHeader('etag')
  if (typeof coding === 'string' && typeof etag === 'string' && etag.startsWith('"')) {
    reply.header('etag', codedEtag(etag, coding))
  }
  done(null, payload)
}

/** A route hook added to every route the plugin compresses (not those with `compress: false`). */
function onCompressedRoutes(hook: onSendHookHandler) {
  return (route: RouteOptions) => {
    if (route.compress === false) return
    route.onSend = [route.onSend ?? []].flat().concat(hook)
  }
}

/**
 * The plugin with its documented options, and our two hooks on each route it compresses: one
 * before its own and one after. Each plugin adds its route hooks from an onRoute hook, and
 * onRoute hooks run in the order they were added, so ours go in before and after it.
 */
export const compression = fp(async (app) => {
  app.addHook('onRoute', onCompressedRoutes(onlySuccessfulAnswers))
  await app.register(compress, {
    threshold: COMPRESSION_THRESHOLD_BYTES,
    encodings: [...CONTENT_CODINGS],
    brotliOptions: BROTLI_OPTIONS,
    // Request bodies stay as sent: a Content-Encoding on a request is not part of the contract.
    globalDecompression: false,
  })
  app.addHook('onRoute', onCompressedRoutes(codedEtags))
})
