// The private parts of Node.js and Fastify the HTTP layer uses, fenced here with the versions
// they were checked on; test/internals.test.ts fails, naming this module, when a release changes
// their shape.
//
// Checked on Node.js 24.21.0 and 26.10.0: node:_http_server gives each connection's socket a
// `parser` (an HTTPParser from node:_http_common) whose `onIncoming` is called once per parsed
// request, and builds the request's IncomingMessage and ServerResponse there. No public option
// stops a connection's parser from turning the rest of a read into requests: `socket.pause()`
// and `destroySoon()` act only after the read is parsed, and `maxRequestsPerSocket` answers the
// extra requests (a 503 each) rather than dropping them.
import type { Socket } from 'node:net'

/** The parser Node attaches to a server-side socket, as far as this module relies on it. */
interface ConnectionParser {
  onIncoming: (...args: unknown[]) => unknown
}

function parserOf(socket: Socket): ConnectionParser | undefined {
  const parser: unknown = Reflect.get(socket, 'parser')
  if (typeof parser !== 'object' || parser === null) return undefined
  return typeof Reflect.get(parser, 'onIncoming') === 'function'
    ? (parser as ConnectionParser)
    : undefined
}

/**
 * Makes the connection's parser drop every request it parses from now on, instead of building
 * a request and a response for each and holding them until the connection closes (D16,
 * "Pipelining"). Returning 1 tells the parser "no body", which is harmless: the connection is
 * closing. False when the parser is not where this module expects it (then only the memory
 * saving is lost; the shape test says so first).
 */
export function dropFurtherRequests(socket: Socket): boolean {
  const parser = parserOf(socket)
  if (parser === undefined) return false
  parser.onIncoming = () => 1
  return true
}

// And the one private part of Fastify the app uses, checked on Fastify 5.12.8: each reply keeps
// the headers it will send in an object under a symbol described `fastify.reply.headers`
// (lib/symbols.js kReplyHeaders), which is what reaches `res.writeHead` as it is. The public
// `reply.headers()` lower-cases every name through `String.prototype.toLowerCase`, a call into
// V8's runtime per header: the response head's fixed part (D13's security headers, the
// operation's) cost 7,000 of getPet's 117,000 instructions that way (docs/benchmarks.md, "Where
// the instructions go, by function"). Our names are lower-case already, so they are copied in
// whole instead.

/** The symbol of a reply's headers, found on the first reply that needs it. */
let replyHeadersKey: symbol | null | undefined

function replyHeadersOf(reply: object): Record<string, unknown> | undefined {
  if (replyHeadersKey === undefined) {
    replyHeadersKey =
      Object.getOwnPropertySymbols(reply).find(
        (key) => key.description === 'fastify.reply.headers',
      ) ?? null
  }
  if (replyHeadersKey === null) return undefined
  const headers: unknown = Reflect.get(reply, replyHeadersKey)
  return typeof headers === 'object' && headers !== null
    ? (headers as Record<string, unknown>)
    : undefined
}

/**
 * Sets `headers` (names in lower case, as Fastify keeps them) on a Fastify reply in one copy.
 * Where the reply is not shaped as this module expects, through `reply.headers()`: the same
 * headers, at the public API's cost (the shape test says so first).
 */
export function setReplyHeaders(
  reply: { headers(values: Readonly<Record<string, string>>): unknown },
  headers: Readonly<Record<string, string>>,
): void {
  const kept = replyHeadersOf(reply)
  if (kept === undefined) reply.headers(headers)
  else Object.assign(kept, headers)
}

/**
 * The first headers of a reply, set by the first hook of every request (plugins/security.ts):
 * the reply's headers become a copy of `headers` with whatever was set before kept over them. A
 * spread of a fixed-shape object is the cheapest copy V8 has, cheaper than setReplyHeaders'.
 */
export function startReplyHeaders(
  reply: { headers(values: Readonly<Record<string, string>>): unknown },
  headers: Readonly<Record<string, string>>,
): void {
  const kept = replyHeadersOf(reply)
  if (kept === undefined || replyHeadersKey == null) reply.headers(headers)
  else Reflect.set(reply, replyHeadersKey, { ...headers, ...kept })
}

/** One header (its name in lower case) on a Fastify reply, as setReplyHeaders sets them. */
export function setReplyHeader(
  reply: { header(name: string, value: string): unknown },
  name: string,
  value: string,
): void {
  const kept = replyHeadersOf(reply)
  if (kept === undefined) reply.header(name, value)
  else kept[name] = value
}

/** Whether Fastify's replies are shaped as setReplyHeaders expects (test/internals.test.ts). */
export function replyHeadersFound(reply: object): boolean {
  return replyHeadersOf(reply) !== undefined
}
