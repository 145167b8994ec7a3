// A listener apart from the API's, for the operator's side of the service: Prometheus' scrapes
// (D17, METRICS_PORT) and orchestrators' probes (D20, PROBE_PORT). A plain node:http server
// with short timeouts, bound before the API's port is said to listen and closed after the
// drain, so that a scrape or a probe during the drain is still answered.
import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  type ServerResponse,
} from 'node:http'
import type { AddressInfo } from 'node:net'
import type { SideListener } from '../config.ts'
import { type ConnectionCap, capConnections } from './connection-cap.ts'

/** Which settings name a side listener: METRICS_PORT/METRICS_HOST or PROBE_PORT/PROBE_HOST. */
export type SideSettings = 'METRICS' | 'PROBE'

/** What a side listener logs through: that it listens, and what it failed to do. */
export interface ListenerLogger {
  info(fields: object, message: string): void
  error(fields: object, message: string): void
}

/** A side listener could not listen (`cause`: the system's error, with its code). */
export class SideListenError extends Error {
  override name = 'SideListenError'
  readonly listener: SideListener
  readonly settings: SideSettings
  constructor(settings: SideSettings, listener: SideListener, cause: unknown) {
    super(`cannot listen for ${settings.toLowerCase()} on ${listener.host}:${listener.port}`, {
      cause,
    })
    this.listener = listener
    this.settings = settings
  }
}

/**
 * The path of a GET or HEAD for one of `paths`; anything else is answered here (404 for
 * another path, 405 for another method) and gets undefined.
 */
export function servedPath(
  req: IncomingMessage,
  res: ServerResponse,
  paths: readonly string[],
): string | undefined {
  const path = (req.url ?? '').split('?', 1)[0] ?? ''
  if (!paths.includes(path)) {
    res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found\n')
    return undefined
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' })
    res.end('method not allowed\n')
    return undefined
  }
  return path
}

export interface SideServer {
  /** e.g. http://127.0.0.1:9464 */
  readonly origin: string
  close(): Promise<void>
}

/**
 * A side listener as its owner sees it. `announce` logs "… listening at …"; not done on
 * listening: the caller says it once every listener it opens is bound, so a start that fails
 * on another port never said it listened.
 */
export interface AnnouncedServer {
  announce(): void
  close(): Promise<void>
}

/** How long a side listener waits for a request's head, its whole, and a silent connection. */
export interface SideTimeouts {
  headersMs: number
  requestMs: number
  /** A connection with no traffic for this long is closed (0: never). */
  idleMs: number
}

/** A scrape may be slow to send; a silent connection is left to the keep-alive time-out. */
const DEFAULT_TIMEOUTS: SideTimeouts = { headersMs: 5_000, requestMs: 10_000, idleMs: 0 }

export interface SideOptions {
  /** Bind with SO_REUSEPORT (each worker's probe thread binds the port itself). */
  reusePort?: boolean
  timeouts?: SideTimeouts
  /** Connections held at most, in all and per address; a newcomer is never refused. */
  cap?: ConnectionCap
  /**
   * The kernel's queue of connections not yet accepted (Node's default 511; the system caps it,
   * net.core.somaxconn): a burst past it is dropped, and its client tries again a second later.
   */
  backlog?: number
}

export async function listenApart(
  settings: SideSettings,
  listener: SideListener,
  handler: RequestListener,
  log: Pick<ListenerLogger, 'error'>,
  options: SideOptions = {},
): Promise<SideServer> {
  const timeouts = options.timeouts ?? DEFAULT_TIMEOUTS
  const server = createServer(
    {
      headersTimeout: timeouts.headersMs,
      requestTimeout: timeouts.requestMs,
      // The head and request time-outs are checked this often: a tenth of the shorter.
      connectionsCheckingInterval: Math.max(100, timeouts.headersMs / 10),
    },
    handler,
  )
  server.timeout = timeouts.idleMs
  if (timeouts.idleMs > 0) server.keepAliveTimeout = Math.min(timeouts.idleMs, 5_000)
  if (options.cap !== undefined) capConnections(server, options.cap)
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new SideListenError(settings, listener, err)))
    const reuse = options.reusePort ? { exclusive: true, reusePort: true } : {}
    const { backlog } = options
    server.listen({ port: listener.port, host: listener.host, backlog, ...reuse }, () => {
      server.removeAllListeners('error')
      // D16: once listening, a connection the system failed to accept is an 'error' event
      // on the server (node:net); unheard, it would end the process. The listener goes on.
      server.on('error', (err) =>
        log.error({ err }, `the ${settings.toLowerCase()} listener failed to accept`),
      )
      resolve()
    })
  })
  const { port } = server.address() as AddressInfo
  const host = listener.host.includes(':') ? `[${listener.host}]` : listener.host
  return {
    origin: `http://${host}:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
