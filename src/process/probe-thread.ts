// D20: the probe thread. It owns the PROBE_PORT listener and answers /healthz and /readyz from
// what the API's thread publishes (probe-memory.ts, and its last readiness by message), so
// accepting, parsing and answering a probe never waits for the API's event loop, however busy a
// flood keeps it. Started by probe-server.ts (through probe-thread-start.js); loads nothing but
// node:http and the side listener.

import type { ServerResponse } from 'node:http'
import { parentPort, workerData } from 'node:worker_threads'
import type { SideListener } from '../config.ts'
import type { ProbeAnswer } from '../http/routes/health.ts'
import { listenApart, servedPath } from '../observability/side-listener.ts'
import { ProbeReader } from './probe-memory.ts'

/** What probe-server.ts gives the thread at its start. */
export interface ProbeThreadData {
  listener: SideListener
  reusePort: boolean
  memory: SharedArrayBuffer
  /** /healthz is 503 once the API's loop has not turned for this long. */
  stallMs: number
  /** /readyz is 503 once readiness has not been checked for this long. */
  readinessStaleMs: number
  /** /healthz and /readyz (routes/health.ts): given, so that this thread loads no more. */
  paths: { liveness: string; readiness: string }
  /** The process's compile cache folder, if it has one (probe-thread-start.js). */
  compileCache: string | undefined
  answers: {
    alive: ProbeAnswer
    stalled: ProbeAnswer
    starting: ProbeAnswer
    stale: ProbeAnswer
    shuttingDown: ProbeAnswer
    overloaded: ProbeAnswer
  }
}

/** Messages between the threads. */
export type ToProbeThread = { type: 'readiness'; answer: ProbeAnswer } | { type: 'close' }
export type FromProbeThread =
  | { type: 'listening'; origin: string }
  /** `code` apart: an Error crosses threads with its message and stack, not its own fields. */
  | { type: 'listen-failed'; error: Error; code: string | undefined }
  | { type: 'log'; fields: object; message: string }
  | { type: 'closed' }

/**
 * D20: what a peer may hold here (a flood aimed at the probe port). An orchestrator's probes are
 * a handful at a time, each on a new connection; a newcomer is never refused, the address
 * holding the most gives way (connection-cap.ts). Within the thread's small heap.
 */
const PROBE_CONNECTIONS = { total: 512, perAddress: 32 }
/** A flood's burst of connections must not fill the queue a probe's connection waits in. */
const PROBE_BACKLOG = 4_096
/**
 * A probe is one small request on a new connection, answered at once: a connection silent, or
 * slow to send its head, for a second is not a probe's (kubelet's own time-out is 1 s at least).
 */
const PROBE_TIMEOUTS = { headersMs: 1_000, requestMs: 1_000, idleMs: 1_000 }

const data = workerData as ProbeThreadData
const port = parentPort
if (port === null) throw new Error('probe-thread.ts runs as a worker thread (probe-server.ts)')
const tell = (message: FromProbeThread) => port.postMessage(message)
const shared = new ProbeReader(data.memory)
const { answers } = data
let readiness: ProbeAnswer = answers.starting

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

/** Liveness: a loop that is busy still turns; one that is stuck does not, and is restarted. */
function liveness(): ProbeAnswer {
  return shared.heartbeatAgeMs() > data.stallMs ? answers.stalled : answers.alive
}

/** Draining and shedding first, as the API port's own /readyz; then the last check, if recent. */
function ready(): ProbeAnswer {
  if (shared.draining()) return answers.shuttingDown
  if (shared.shedding()) return answers.overloaded
  if (readiness !== answers.starting && shared.readinessAgeMs() > data.readinessStaleMs) {
    return answers.stale
  }
  return readiness
}

const log = { error: (fields: object, message: string) => tell({ type: 'log', fields, message }) }

try {
  const server = await listenApart(
    'PROBE',
    data.listener,
    (req, res) => {
      // Probes never need keep-alive (each opens a connection of its own): every answer here,
      // the 404 and 405 too, closes its connection, so none is left open to fill the port.
      res.setHeader('connection', 'close')
      const path = servedPath(req, res, [data.paths.liveness, data.paths.readiness])
      if (path === undefined) return
      send(res, path === data.paths.liveness ? liveness() : ready(), req.method === 'HEAD')
    },
    log,
    {
      reusePort: data.reusePort,
      cap: PROBE_CONNECTIONS,
      timeouts: PROBE_TIMEOUTS,
      backlog: PROBE_BACKLOG,
    },
  )
  port.on('message', (message: ToProbeThread) => {
    if (message.type === 'readiness') readiness = message.answer
    else server.close().then(() => tell({ type: 'closed' }))
  })
  tell({ type: 'listening', origin: server.origin })
} catch (err) {
  // The cause (EADDRINUSE, …) is what the start names PROBE_PORT by.
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause : (err as Error)
  const code = 'code' in cause ? String(cause.code) : undefined
  tell({ type: 'listen-failed', error: cause, code })
}
