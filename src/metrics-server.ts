// D17: the listener Prometheus scrapes, apart from the API: METRICS_PORT on METRICS_HOST, one
// path, `/metrics`. Nothing of the API is reachable here and `/metrics` is not on the API's
// port, so metrics are never public by accident; the port can be firewalled on its own.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { MetricsListener } from './config.ts'

export const METRICS_PATH = '/metrics'

/** The exposition: prom-client's text format (version 0.0.4) and its Content-Type. */
export interface Scrape {
  contentType: string
  body(): Promise<string>
}

interface InfoLogger {
  info(fields: object, message: string): void
  error(fields: object, message: string): void
}

/** The metrics listener could not listen (`cause`: the system's error, with its code). */
export class MetricsListenError extends Error {
  override name = 'MetricsListenError'
  readonly listener: MetricsListener
  constructor(listener: MetricsListener, cause: unknown) {
    super(`cannot listen for metrics on ${listener.host}:${listener.port}`, { cause })
    this.listener = listener
  }
}

export interface MetricsServer {
  /** e.g. http://127.0.0.1:9464/metrics */
  readonly url: string
  /**
   * Logs "metrics listening at …". Not done on listening: the caller says it once every
   * listener it opens is bound, so a start that fails on another port never said it listened.
   */
  announce(): void
  close(): Promise<void>
}

export async function listenForScrapes(
  listener: MetricsListener,
  scrape: Scrape,
  log: InfoLogger,
): Promise<MetricsServer> {
  const server = createServer({ requestTimeout: 10_000, headersTimeout: 5_000 }, (req, res) => {
    const path = (req.url ?? '').split('?', 1)[0]
    if (path !== METRICS_PATH) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found\n')
      return
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' })
      res.end('method not allowed\n')
      return
    }
    scrape.body().then(
      (body) => {
        res.writeHead(200, { 'content-type': scrape.contentType, 'cache-control': 'no-store' })
        res.end(req.method === 'HEAD' ? undefined : body)
      },
      (err: unknown) => {
        // In a cluster, a worker that does not answer within prom-client's 5 s fails the scrape.
        log.error({ err }, 'metrics scrape failed')
        res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' }).end('scrape failed\n')
      },
    )
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new MetricsListenError(listener, err)))
    server.listen({ port: listener.port, host: listener.host }, () => {
      server.removeAllListeners('error')
      // D16: once listening, a connection the system failed to accept is an 'error' event
      // on the server (node:net); unheard, it would end the process. The listener goes on.
      server.on('error', (err) => log.error({ err }, 'the metrics listener failed to accept'))
      resolve()
    })
  })
  const { port } = server.address() as AddressInfo
  const host = listener.host.includes(':') ? `[${listener.host}]` : listener.host
  const url = `http://${host}:${port}${METRICS_PATH}`
  return {
    url,
    announce: () => log.info({ url }, `metrics listening at ${url}`),
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
