// D20: /healthz and /readyz on a listener of their own (PROBE_PORT on PROBE_HOST), for an
// orchestrator's probes. Node accepts one connection per turn of its event loop, so when a
// flood of connections reaches the API's port, a probe's fresh connection waits behind them in
// the accept queue, for seconds, and a liveness probe that times out gets a busy but healthy
// process restarted. Here a probe is accepted at the next turn. The answers are the API port's
// (routes/health.ts), without its headers; /readyz also says 503 while requests are shed (D16),
// as the API port's /readyz, which is shed, does.
//
// Under --workers each worker binds the port itself (SO_REUSEPORT, Linux), the kernel spreading
// probes over them: a connection the cluster primary hands a worker waits behind the API's, one
// acknowledged message at a time.
import type { ServerResponse } from 'node:http'
import type { SideListener } from '../config.ts'
import { errorBody } from '../errors.ts'
import { SHED_ANSWER } from '../http/plugins/load-shedding.ts'
import { ALIVE, LIVENESS_PATH, type ProbeAnswer, READINESS_PATH } from '../http/routes/health.ts'
import {
  type AnnouncedServer,
  type ListenerLogger,
  listenApart,
  servedPath,
} from '../observability/side-listener.ts'

export interface ProbeServer extends AnnouncedServer {
  /** e.g. http://127.0.0.1:8081 */
  readonly origin: string
}

export interface Probes {
  ready(): Promise<ProbeAnswer>
  /** Whether the API's requests are being shed now (D16). */
  shedding(): boolean
}

/** The API port's /readyz is shed with 503 under overload; this one, never shed, says the same. */
const OVERLOADED: ProbeAnswer = {
  statusCode: 503,
  retryAfter: SHED_ANSWER.retryAfter,
  body: errorBody('unavailable', SHED_ANSWER.message),
}

function send(res: ServerResponse, answer: ProbeAnswer, head: boolean): void {
  const body = JSON.stringify(answer.body)
  res.writeHead(answer.statusCode, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    ...(answer.retryAfter === undefined ? {} : { 'retry-after': answer.retryAfter }),
  })
  res.end(head ? undefined : body)
}

export async function listenForProbes(
  listener: SideListener,
  probes: Probes,
  log: ListenerLogger,
  options: { ownSocketPerProcess: boolean },
): Promise<ProbeServer> {
  const server = await listenApart(
    'PROBE',
    listener,
    (req, res) => {
      const path = servedPath(req, res, [LIVENESS_PATH, READINESS_PATH])
      if (path === undefined) return
      const head = req.method === 'HEAD'
      if (path === LIVENESS_PATH) {
        send(res, ALIVE, head)
        return
      }
      if (probes.shedding()) {
        send(res, OVERLOADED, head)
        return
      }
      probes.ready().then(
        (answer) => send(res, answer, head),
        (err: unknown) => {
          log.error({ err }, 'readiness probe failed')
          res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('error\n')
        },
      )
    },
    log,
    // SO_REUSEPORT is Linux's (and a few BSDs'); elsewhere workers share the primary's socket.
    { reusePort: options.ownSocketPerProcess && process.platform === 'linux' },
  )
  return {
    origin: server.origin,
    announce: () =>
      log.info({ url: server.origin }, `probes (/healthz, /readyz) listening at ${server.origin}`),
    close: () => server.close(),
  }
}
