// D26: gzip and brotli for successful answers over about 1 KiB, when the client accepts them
// (RFC 9110 §12.5.3), through the ecosystem's plugin, @fastify/compress. Register it before any
// route: it attaches itself to each route as the route is added.
import { constants } from 'node:zlib'
import compress from '@fastify/compress'
import type { onSendHookHandler, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'

/** Bodies smaller than this are sent as they are: a few hundred bytes saved are not worth it. */
export const COMPRESSION_THRESHOLD_BYTES = 1024

/**
 * Brotli at quality 3 (D26). zlib's default, 11, is made for files compressed once and costs a
 * request two hundred times what 3 does on a list of 100 pets; 3 costs what gzip does and is
 * smaller; 4 (the plugin's choice) saves a few per cent more for half as much CPU again
 * (scripts/bench/compression.ts; docs/benchmarks.md, "Measurements behind choices in the code").
 */
export const BROTLI_QUALITY = 3

/** `"abc"` with the coding `br` is `"abc-br"`. */
export function codedEtag(etag: string, coding: string): string {
  return `${etag.slice(0, -1)}-${coding}"`
}

/** The content codings offered, most preferred first when the client weighs them equally. */
export const CONTENT_CODINGS = ['br', 'gzip'] as const

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
    brotliOptions: { params: { [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY } },
    // Request bodies stay as sent: a Content-Encoding on a request is not part of the contract.
    globalDecompression: false,
  })
  app.addHook('onRoute', onCompressedRoutes(codedEtags))
})
