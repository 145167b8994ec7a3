// D17: gzip and brotli for successful answers over about 1 KiB, when the client accepts them
// (RFC 9110 §12.5.3), through the ecosystem's plugin, @fastify/compress. Register it before any
// route: it attaches itself to each route as the route is added.
import { constants } from 'node:zlib'
import compress from '@fastify/compress'
import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  onSendHookHandler,
  RouteOptions,
} from 'fastify'
import fp from 'fastify-plugin'

/** Bodies smaller than this are sent as they are: a few hundred bytes saved are not worth it. */
export const COMPRESSION_THRESHOLD_BYTES = 1024

/**
 * Brotli at quality 3 (D17). zlib's default, 11, is made for files compressed once and costs a
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

type OnSendDone = (err: Error | null, payload?: unknown) => void
/** An onSend hook in its callback form, as the plugin's is and ours is. */
type OnSendHook = (
  this: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
  done: OnSendDone,
) => void

/** A route's hooks of one kind as a list (Fastify takes a function or a list). */
function listOf<T>(hooks: T | T[] | undefined): T[] {
  return hooks === undefined ? [] : ([hooks].flat() as T[])
}

/**
 * The route's one compression hook, around the plugin's. Only successful answers are compressed:
 * errors are small and carry what the client sent, and a client must not make the service spend
 * compression on answers to its garbage (D16); a 304 has no body. Without `Accept-Encoding` no
 * coding is acceptable, so nothing of the plugin runs: most API clients send none (wrk, curl,
 * the SDK under Node's fetch sends one), and each hook costs every request.
 *
 * A strong ETag names one sequence of bytes (RFC 9110 §8.8.3), and a compressed body is another
 * one: it gets the coding appended, `"<tag>-gzip"`, as Apache httpd does. Weak tags
 * (@fastify/static's) stay: every coding of a representation is equivalent under them.
 */
function compressSuccessfulAnswers(compress: OnSendHook): OnSendHook {
  return function compressed(request, reply, payload, done) {
    const status = reply.statusCode
    if (request.headers['accept-encoding'] === undefined || status < 200 || status >= 300) {
      done(null, payload)
      return
    }
    compress.call(this, request, reply, payload, (err, coded) => {
      const coding = reply.getHeader('content-encoding')
      const etag = reply.getHeader('etag')
      if (typeof coding === 'string' && typeof etag === 'string' && etag.startsWith('"')) {
        reply.header('etag', codedEtag(etag, coding))
      }
      done(err, coded === undefined ? payload : coded)
    })
  }
}

export const compression = fp(async (app) => {
  // @fastify/compress adds to every route an onRequest hook (reply.compress(), which we do not
  // use) and an onSend hook. Both are taken back and the onSend wrapped into one hook that does
  // nothing for a request that accepts no coding: the hooks as the plugin left them, with our two
  // beside them, cost getPet 9,000 of its ~190,000 instructions and listPets 11,000
  // (docs/benchmarks.md, "Performance, round three: the request path"). A route declaring the
  // plugin's own `compress` option would get another number of hooks, and the start fails.
  const before = new WeakMap<RouteOptions, { onRequest: number; onSend: number }>()
  app.addHook('onRoute', (route) => {
    before.set(route, {
      onRequest: listOf(route.onRequest).length,
      onSend: listOf(route.onSend).length,
    })
  })
  await app.register(compress, {
    threshold: COMPRESSION_THRESHOLD_BYTES,
    encodings: [...CONTENT_CODINGS],
    brotliOptions: { params: { [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY } },
    // Request bodies stay as sent: a Content-Encoding on a request is not part of the contract.
    globalDecompression: false,
  })
  app.addHook('onRoute', (route) => {
    const mark = before.get(route)
    if (mark === undefined) return
    const onSend = listOf(route.onSend)
    const added = onSend.slice(mark.onSend)
    if (added.length !== 1 || added[0] === undefined) {
      throw new Error(
        `@fastify/compress added ${added.length} onSend hooks to ${route.url}; one was expected`,
      )
    }
    const hook = compressSuccessfulAnswers(added[0] as unknown as OnSendHook)
    route.onSend = [...onSend.slice(0, mark.onSend), hook as unknown as onSendHookHandler]
    route.onRequest = listOf(route.onRequest).slice(0, mark.onRequest)
  })
})
