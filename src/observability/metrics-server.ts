// D17: the listener Prometheus scrapes, apart from the API: METRICS_PORT on METRICS_HOST, one
// path, `/metrics`. Nothing of the API is reachable here and `/metrics` is not on the API's
// port, so metrics are never public by accident; the port can be firewalled on its own.
import type { SideListener } from '../config.ts'
import {
  type AnnouncedServer,
  type ListenerLogger,
  listenApart,
  servedPath,
} from './side-listener.ts'

export const METRICS_PATH = '/metrics'

/** The exposition: prom-client's text format (version 0.0.4) and its Content-Type. */
export interface Scrape {
  contentType: string
  body(): Promise<string>
}

export interface MetricsServer extends AnnouncedServer {
  /** e.g. http://127.0.0.1:9464/metrics */
  readonly url: string
}

export async function listenForScrapes(
  listener: SideListener,
  scrape: Scrape,
  log: ListenerLogger,
): Promise<MetricsServer> {
  const server = await listenApart(
    'METRICS',
    listener,
    (req, res) => {
      if (servedPath(req, res, [METRICS_PATH]) === undefined) return
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
    },
    log,
  )
  const url = `${server.origin}${METRICS_PATH}`
  return {
    url,
    announce: () => log.info({ url }, `metrics listening at ${url}`),
    close: () => server.close(),
  }
}
