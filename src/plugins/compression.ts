// D17: gzip and brotli for successful answers over about 1 KiB, when the client accepts them
// (RFC 9110 §12.5.3), through the ecosystem's plugin, @fastify/compress. Register it before any
// route: it attaches itself to each route as the route is added.
import { constants } from 'node:zlib'
import compress from '@fastify/compress'
import type { FastifyReply, FastifyRequest, onSendHookHandler, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'

/** Bodies smaller than this are sent as they are: a few hundred bytes saved are not worth it. */
export const COMPRESSION_THRESHOLD_BYTES = 1024

/**
 * Brotli at quality 3. zlib's default, 11, is made for files compressed once: on a list of 100
 * pets (6.9 KB) it took 11.7 ms of CPU, against 58 µs at 3, 89 µs at 4 (the plugin's choice)
 * and 62 µs for gzip, for 615, 779, 754 and 964 bytes (scripts/bench/compression.ts, D17).
 * Quality 3 costs what gzip does and is 20% smaller; 4 saves 3% more for half as much CPU again.
 */
export const BROTLI_QUALITY = 3

/** The plugin's documented opt-out, read from the request when its onSend hook runs. */
const NO_COMPRESSION = 'x-no-compression'

/**
 * Only successful answers are compressed. Errors are small and carry what the client sent; a
 * client must not make the service spend compression on answers to its garbage (D16). A 304
 * has no body; a stream (a docs asset's) would otherwise still be piped through a compressor.
 */
function keepUncompressedUnlessSuccess(
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
  done: (err: null, payload: unknown) => void,
): void {
  if (reply.statusCode < 200 || reply.statusCode >= 300) request.headers[NO_COMPRESSION] = 'status'
  done(null, payload)
}

/**
 * A strong ETag names one sequence of bytes (RFC 9110 §8.8.3), and a compressed body is
 * another one: it gets the coding appended, `"<tag>-gzip"`, as Apache httpd does. Weak tags
 * (@fastify/static's) stay: every coding of a representation is equivalent under them.
 */
function etagOfCodedBody(
  _request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
  done: (err: null, payload: unknown) => void,
): void {
  const coding = reply.getHeader('content-encoding')
  const etag = reply.getHeader('etag')
  if (typeof coding === 'string' && typeof etag === 'string' && etag.startsWith('"')) {
    reply.header('etag', codedEtag(etag, coding))
  }
  done(null, payload)
}

/** `"abc"` with the coding `br` is `"abc-br"`. */
export function codedEtag(etag: string, coding: string): string {
  return `${etag.slice(0, -1)}-${coding}"`
}

/** The content codings offered, most preferred first when the client weighs them equally. */
export const CONTENT_CODINGS = ['br', 'gzip'] as const

function appendOnSend(route: RouteOptions, hook: onSendHookHandler): void {
  const existing = route.onSend
  route.onSend = [...(existing === undefined ? [] : [existing].flat()), hook]
}

export const compression = fp(async (app) => {
  // Instance hooks run before the plugin's, which it adds to each route.
  app.addHook('onSend', keepUncompressedUnlessSuccess)
  await app.register(compress, {
    threshold: COMPRESSION_THRESHOLD_BYTES,
    encodings: [...CONTENT_CODINGS],
    brotliOptions: { params: { [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY } },
    // Request bodies stay as sent: a Content-Encoding on a request is not part of the contract.
    globalDecompression: false,
  })
  // Added after the plugin's own onRoute hook, so this runs after it has compressed.
  app.addHook('onRoute', (route) => appendOnSend(route, etagOfCodedBody))
})
