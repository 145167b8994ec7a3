// The HTTP/1.1 server that owns the sockets (D16): what one client can make this process hold,
// in memory or in time, is bounded by configuration, never by the client. The app (app.ts) never
// sees a connection; process/compose.ts hands these parts to Fastify (`serverFactory`, `clientErrorHandler`).
//
// - Time. A request's headers must arrive within PETSTORE_HEADERS_TIMEOUT_MS and the whole request
//   within PETSTORE_REQUEST_TIMEOUT_MS. Node checks these every `connectionsCheckingInterval`
//   (30 s by default, which let slow clients live 75–90 s); here every second, or as often as
//   the headers timeout when that is shorter.
// - Connections. Past PETSTORE_MAX_CONNECTIONS, new connections are closed at once (Node's
//   `maxConnections`), before the process runs out of file descriptors.
// - Pipelining. Node parses every request of one read at once (a 64 KiB read holds a thousand
//   pipelined GETs) and keeps each answer in memory until the client reads it: 200 sockets that
//   pipelined 600 `GET /v1/openapi.json` each and never read took the process past its heap
//   limit. So the requests of a connection are handed to the app one at a time, in order (as
//   nginx and Go's net/http serve them), the next only once less than MAX_UNSENT_BYTES waits to be
//   sent on the socket; a connection with more than MAX_WAITING_REQUESTS requests waiting is
//   closed once its current answer is out, and the waiting requests are never run.
// - HTTP-layer errors (a malformed request, bad chunked encoding, headers over 16 KiB, a timeout,
//   another HTTP version, a missing Host) are the Error body (D4) with X-Request-Id and the
//   security headers, and close the connection. An answer the app is still working on for an
//   earlier request on that connection is written first, so a committed create is answered 201,
//   never 400.
import { randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import type { ConnectionLimits } from '../config.ts'
import { type ErrorCode, errorBody, errorCatalog } from '../errors.ts'
import { isLetters } from './ascii-case.ts'
import { dropFurtherRequests } from './internals.ts'
import { requestId } from './plugins/request-id.ts'

/** Requests waiting behind the one being answered on one connection; more closes it. */
export const MAX_WAITING_REQUESTS = 32
/** Bytes waiting to be sent on a socket above which its next request waits for the client. */
export const MAX_UNSENT_BYTES = 64 * 1024
/** Longest request target (path and query) served; longer is 414 (RFC 9110 §15.5.15). */
export const MAX_TARGET_LENGTH = 8 * 1024
/** Idle keep-alive connections outlive the 60 s idle timeout of common load balancers. */
export const KEEP_ALIVE_TIMEOUT_MS = 72_000
/** How often Node looks for requests past their time (its default, 30 s, is too coarse). */
const TIMEOUT_CHECK_INTERVAL_MS = 1000
/** A connection closed after an error answer is destroyed if the client does not read it. */
const LINGER_MS = 5000

type Handler = (req: IncomingMessage, res: ServerResponse) => void
type Headers = Readonly<Record<string, string>>

interface RawError {
  code: ErrorCode
  message: string
  /** The request id: the client's well-formed X-Request-Id when a request was parsed. */
  id: string
}

/** An answer written to the socket directly: nothing of the app runs for it. */
function rawErrorResponse(error: RawError, securityHeaders: Headers): string {
  const status = errorCatalog[error.code].status
  const body = JSON.stringify(errorBody(error.code, error.message))
  const headers: Record<string, string | number> = {
    ...securityHeaders,
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    'x-request-id': error.id,
    connection: 'close',
  }
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}`)
  return `HTTP/1.1 ${status} ${reasonPhrase(status)}\r\n${lines.join('\r\n')}\r\n\r\n${body}`
}

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  413: 'Content Too Large',
  414: 'URI Too Long',
  431: 'Request Header Fields Too Large',
  505: 'HTTP Version Not Supported',
}

function reasonPhrase(status: number): string {
  return REASONS[status] ?? 'Error'
}

/** A parser error as Node's `clientError` gives it: llhttp's code and reason, where it stopped. */
type ParserError = NodeJS.ErrnoException & {
  reason?: string
  /** The bytes of the read being parsed (not always from the request's start). */
  rawPacket?: Buffer
  /** Where in rawPacket llhttp stopped: at the byte it refused, or just after it. */
  bytesParsed?: number
}

const LF = 0x0a
const CR = 0x0d

/**
 * The index in rawPacket of a bare LF (one not after a CR) where llhttp stopped, or -1. llhttp
 * stops on the LF itself for some errors and just after it for others, so both are looked at.
 * An LF at the start of the read is not counted: its CR may have ended the read before.
 */
function bareLfWhereStopped(err: ParserError): number {
  const packet = err.rawPacket
  const at = err.bytesParsed
  if (packet === undefined || at === undefined) return -1
  for (const i of [at - 1, at]) {
    if (i > 0 && packet[i] === LF && packet[i - 1] !== CR) return i
  }
  return -1
}

/**
 * The line a refused bare LF ends, from llhttp's reason and the bytes before, and the section of
 * RFC 9112 that asks for its CRLF.
 */
function lineEndedByBareLf(err: ParserError, lf: number): [line: string, section: string] {
  const reason = err.reason ?? ''
  if (reason.includes('after version')) return ['the request line', '§2.2']
  if (reason.includes('chunk')) return ['a line of the chunked body', '§7.1']
  if (err.rawPacket?.[lf - 1] === LF) return ['the empty line after the headers', '§2.2']
  return ['a header line', '§2.2']
}

const VERSION_NOT_SUPPORTED = {
  code: 'http_version_not_supported',
  message: 'only HTTP/1.0 and HTTP/1.1 are served',
} as const

/**
 * What a parser error means to the client (Node's `clientError`, llhttp's codes and reasons).
 *
 * Line endings: RFC 9112 §2.2 lets a server take a bare LF as the end of a line, and Node's
 * llhttp, in the strict mode Node runs it in, refuses one instead. The only way to make it accept
 * one is Node's `insecureHTTPParser`, which turns on every leniency at once (bare CRs, invalid
 * header characters, Transfer-Encoding and Content-Length together, …): the differences between
 * parsers that request smuggling is made of (RFC 9112 §11.2). So a bare LF is refused, with a 400
 * that says so; it is not a version this server does not support (505).
 */
function errorForClientError(err: ParserError, limits: ConnectionLimits) {
  switch (err.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return {
        code: 'request_timeout',
        message: `the request did not arrive in time: headers are allowed ${limits.headersTimeoutMs} ms, the whole request ${limits.requestTimeoutMs} ms`,
      } as const
    case 'HPE_HEADER_OVERFLOW':
      return {
        code: 'header_fields_too_large',
        message: 'the request line and headers are larger than 16 KiB',
      } as const
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return {
        code: 'payload_too_large',
        message: 'the chunk extensions of the body are too large',
      } as const
  }
  const lf = bareLfWhereStopped(err)
  if (lf !== -1 && (err.code === 'HPE_INVALID_VERSION' || err.code === 'HPE_STRICT')) {
    // `HTTP/2.0` then a bare LF: the version is the first thing wrong (RFC 9110 §15.6.6).
    const version = /HTTP\/(\d)\.(\d)$/.exec(err.rawPacket?.toString('latin1', lf - 8, lf) ?? '')
    if (version !== null && !(version[1] === '1' && (version[2] === '0' || version[2] === '1'))) {
      return VERSION_NOT_SUPPORTED
    }
  }
  if (
    lf !== -1 &&
    (err.code === 'HPE_INVALID_VERSION' ||
      err.code === 'HPE_STRICT' ||
      err.code === 'HPE_CR_EXPECTED' ||
      err.code === 'HPE_INVALID_HEADER_TOKEN')
  ) {
    const [line, section] = lineEndedByBareLf(err, lf)
    return {
      code: 'invalid_request',
      message: `${line} must end in CRLF, not a bare LF (RFC 9112 ${section})`,
    } as const
  }
  if (err.code === 'HPE_INVALID_VERSION') {
    // "Invalid HTTP version": llhttp read HTTP/<digit>.<digit> and knows no such version. It is
    // well formed when the line ends there, so it is 505 (RFC 9110 §15.6.6); HTTP/1.2 too, which
    // RFC 9110 §2.5 would have served as 1.1, but strict llhttp refuses it (see above).
    const next = err.rawPacket?.[err.bytesParsed ?? -1]
    if (err.reason === 'Invalid HTTP version' && (next === undefined || next === CR)) {
      return VERSION_NOT_SUPPORTED
    }
    return {
      code: 'invalid_request',
      message:
        'the request line is malformed: it must be a method, a target and HTTP/1.1, separated by single spaces and ended by CRLF (RFC 9112 §3)',
    } as const
  }
  // llhttp's reason is a short fixed text ("Invalid header value char"); never the bytes sent.
  const reason = (err.reason ?? '').replace(/[^\x20-\x7e]/g, '').slice(0, 100)
  return {
    code: 'invalid_request',
    message: `the request is not valid HTTP/1.1${reason ? `: ${reason}` : ''}`,
  } as const
}

/** RFC 9112 §3.2: an HTTP/1.1 request must carry exactly one Host. */
function hostHeaderCount(req: IncomingMessage): number {
  let count = 0
  const raw = req.rawHeaders
  for (let i = 0; i < raw.length; i += 2) {
    if (isLetters(raw[i] ?? '', 'host')) count++
  }
  return count
}

/** A request the server refuses before the app sees it, or undefined. */
function refusal(req: IncomingMessage): Omit<RawError, 'id'> | undefined {
  if (req.httpVersionMajor !== 1) {
    return { code: 'http_version_not_supported', message: 'only HTTP/1.0 and HTTP/1.1 are served' }
  }
  if (req.httpVersionMinor === 1 && hostHeaderCount(req) !== 1) {
    return {
      code: 'invalid_request',
      message: 'an HTTP/1.1 request needs exactly one Host header (RFC 9112 §3.2)',
    }
  }
  if ((req.url?.length ?? 0) > MAX_TARGET_LENGTH) {
    return {
      code: 'uri_too_long',
      message: `the request target is longer than ${MAX_TARGET_LENGTH} characters`,
    }
  }
  return undefined
}

/** One connection: its requests reach the app in order, one at a time (see the top). */
class Connection {
  readonly #socket: Socket
  readonly #handler: Handler
  readonly #securityHeaders: Headers
  readonly #waiting: [IncomingMessage, ServerResponse][] = []
  /** The request the app is answering, and its response. */
  #active: IncomingMessage | undefined
  #activeResponse: ServerResponse | undefined
  #awaitingDrain = false
  /** Set once the connection is to close: the error answer to send last, or null for none. */
  #last: RawError | null | undefined

  constructor(socket: Socket, handler: Handler, securityHeaders: Headers) {
    this.#socket = socket
    this.#handler = handler
    this.#securityHeaders = securityHeaders
    socket.once('close', () => {
      this.#waiting.length = 0
    })
  }

  receive(req: IncomingMessage, res: ServerResponse): void {
    if (this.#last !== undefined) return
    const refused = refusal(req)
    if (refused !== undefined) {
      this.#closeAfterAnswers({ ...refused, id: requestId(req) })
      return
    }
    if (this.#waiting.length >= MAX_WAITING_REQUESTS) {
      // A client that pipelines this far ahead without reading: the waiting requests never ran,
      // so closing loses nothing; the answer in progress is still sent.
      this.#waiting.length = 0
      // The rest of the read being parsed still becomes requests, each kept with a response
      // until the connection closes: a few hundred megabytes for a few hundred pipelining
      // sockets, a quarter of that when they are dropped (docs/benchmarks.md, "Measurements
      // behind choices in the code"; internals.ts says why no public way does it).
      dropFurtherRequests(this.#socket)
      this.#closeAfterAnswers(null)
      return
    }
    this.#waiting.push([req, res])
    this.#next()
  }

  /** A parser error or timeout on this connection (Node's `clientError`). */
  clientError(error: Omit<RawError, 'id'>): void {
    if (this.#last !== undefined) return
    const raw = { ...error, id: randomUUID() }
    const active = this.#active
    // The error is in the active request's own bytes (its body): it is that request's answer.
    if (active !== undefined && !active.complete) {
      this.#last = raw
      this.#waiting.length = 0
      this.#writeLast()
      return
    }
    this.#closeAfterAnswers(raw)
  }

  #closeAfterAnswers(last: RawError | null): void {
    this.#last = last
    this.#next()
  }

  readonly #next = (): void => {
    if (this.#active !== undefined || this.#awaitingDrain || this.#socket.destroyed) return
    if (this.#socket.writableLength > MAX_UNSENT_BYTES) {
      this.#awaitingDrain = true
      this.#socket.once('drain', () => {
        this.#awaitingDrain = false
        this.#next()
      })
      return
    }
    const next = this.#waiting.shift()
    if (next === undefined) {
      if (this.#last !== undefined) this.#writeLast()
      return
    }
    const [req, res] = next
    this.#active = req
    this.#activeResponse = res
    // `on`, not `once`: a response closes once, and is dropped with its listener after; `once`
    // would wrap the listener and remove it, on every request.
    res.on('close', this.#answered)
    // The app sees the request once the parser is done with the bytes it is parsing now: an
    // error in the request's own bytes that came in the same read (a malformed chunk after the
    // headers) is then its answer, as it must be, even when the app would answer at once,
    // without waiting for the body (a 401 from auth, which is synchronous).
    queueMicrotask(() => this.#handler(req, res))
  }

  /** The active request's response is sent (or its connection gone): on to the next. */
  readonly #answered = (): void => {
    this.#active = undefined
    this.#activeResponse = undefined
    this.#next()
  }

  #writeLast(): void {
    const socket = this.#socket
    if (socket.destroyed || socket.writableEnded) return
    const last = this.#last
    setTimeout(() => socket.destroy(), LINGER_MS).unref()
    if (last === null || last === undefined) {
      // Closed for pipelining too far ahead: Node holds every request it parsed from the
      // connection until it closes (~2 KB each, 600 per socket in the attack), so it closes as
      // soon as the answers before are handed to the kernel, without lingering.
      socket.destroySoon()
      return
    }
    // A response of the app already under way cannot be cut into: the connection just closes.
    const started = this.#activeResponse?.headersSent === true
    // end(), not destroy(): closing with the client's unread bytes pending would reset the
    // connection and could lose this answer; the timer above ends a client that never reads.
    if (socket.writable && !started) socket.end(rawErrorResponse(last, this.#securityHeaders))
    else socket.end()
  }
}

const connections = new WeakMap<Socket, Connection>()

export interface HttpServerParts {
  /** Fastify's `serverFactory`: the node:http server with D16's bounds. */
  serverFactory(handler: Handler): Server
  /** Fastify's `clientErrorHandler` (called with the Fastify instance as `this`). */
  clientErrorHandler(this: FastifyInstance, err: Error, socket: Socket): void
}

/** The server and its HTTP-layer error handling, for buildApp's `http` part. */
export function httpServerParts(
  limits: ConnectionLimits,
  securityHeaders: Headers,
): HttpServerParts {
  const connectionOf = (socket: Socket, handler: Handler): Connection => {
    let connection = connections.get(socket)
    if (connection === undefined) {
      connection = new Connection(socket, handler, securityHeaders)
      connections.set(socket, connection)
    }
    return connection
  }
  let appHandler: Handler = () => {}

  return {
    serverFactory(handler) {
      appHandler = handler
      const server = createServer(
        {
          headersTimeout: limits.headersTimeoutMs,
          requestTimeout: limits.requestTimeoutMs,
          keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
          // At least as often as the shorter timeout, so that a short one is kept to as well.
          connectionsCheckingInterval: Math.min(TIMEOUT_CHECK_INTERVAL_MS, limits.headersTimeoutMs),
          // A missing Host is refused here (refusal()), as the Error body; Node's own 400 is empty.
          requireHostHeader: false,
        },
        (req, res) => connectionOf(req.socket, handler).receive(req, res),
      )
      server.maxConnections = limits.maxConnections
      return server
    },
    clientErrorHandler(err, socket) {
      const code = (err as NodeJS.ErrnoException).code
      if (code === 'ECONNRESET' || socket.destroyed) {
        socket.destroy()
        return
      }
      const error = errorForClientError(err, limits)
      // Not the error itself: its rawPacket is the request's bytes, Authorization included (D8).
      const { reason, bytesParsed } = err as Error & { reason?: string; bytesParsed?: number }
      this.log.debug(
        { code, reason, bytesParsed },
        'HTTP-layer error; answering and closing the connection',
      )
      connectionOf(socket, appHandler).clientError(error)
    },
  }
}

/** The part of a pino/Fastify logger this needs. */
interface WarnLogger {
  warn(fields: object, message: string): void
}

/**
 * D16: Fastify listens for the server's 'error' only until it listens. After that, a
 * connection the system failed to accept (node:net's accept error: out of memory or buffers,
 * file descriptors past what libuv's reserve absorbs) is an 'error' event with no listener,
 * which ends the process. It costs one client its connection; the server goes on accepting.
 */
export function logAcceptErrors(server: Server, log: WarnLogger): void {
  server.on('error', (err) => log.warn({ err }, 'a connection could not be accepted'))
}

const DROP_LOG_INTERVAL_MS = 60_000

/**
 * Connections closed at the cap (Node's `drop` event) are logged once when it is first reached,
 * then at most once a minute with the number closed since, so a flood cannot flood the log.
 */
export function logDroppedConnections(server: Server, log: WarnLogger, now = Date.now): void {
  let dropped = 0
  let lastLogAt = Number.NEGATIVE_INFINITY
  server.on('drop', () => {
    dropped += 1
    if (now() - lastLogAt < DROP_LOG_INTERVAL_MS) return
    log.warn(
      { dropped, maxConnections: server.maxConnections },
      'connections are at PETSTORE_MAX_CONNECTIONS; new ones are closed at once',
    )
    lastLogAt = now()
    dropped = 0
  })
}
