// The one private part of Node.js the HTTP server uses (http-server.ts), fenced here with the
// versions it was checked on; test/internals.test.ts fails, naming this module, when a release
// changes its shape.
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
