// D11: how a process of `petstore serve` stops. SIGTERM or SIGINT drains: readiness turns 503,
// in-flight requests finish, the store closes, exit 0. A second signal, or DRAIN_MS, ends the
// process regardless. An uncaught error, a bug, drains too and exits 1; its log line says what it
// was and, for an 'error' event, which emitter (uncaughtFields).
//
// One signal can arrive twice. A terminal's Ctrl-C and systemd's default KillMode signal every
// process of the group, and `npm start` passes its own copy on to the server it runs, so the
// server gets the signal once directly and once from npm. A signal within REPEAT_MS of the
// first is that first one, not an operator's "stop now".

import { emittedErrorStack } from './internals.ts'

/** A lone process, or a cluster worker, drains within this. */
export const DRAIN_MS = 10_000

/** A termination signal this soon after the first is a copy of it. */
export const REPEAT_MS = 1000

type Termination = 'SIGTERM' | 'SIGINT'

/**
 * Calls `first` on the first SIGTERM or SIGINT, and `again` on one that comes REPEAT_MS or more
 * after it; copies in between are dropped.
 */
export function onTerminationSignals(handlers: {
  first(signal: Termination): void
  again(signal: Termination): void
}): void {
  let firstAt: number | undefined
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      const now = performance.now()
      if (firstAt === undefined) {
        firstAt = now
        handlers.first(signal)
      } else if (now - firstAt >= REPEAT_MS) {
        handlers.again(signal)
      }
    })
  }
}

/** The part of a pino/Fastify logger this needs. */
interface ShutdownLogger {
  info(fields: object, message: string): void
  error(fields: object, message: string): void
}

/**
 * Drains with `close`, then exits with `code` (1 if closing fails or takes over DRAIN_MS).
 * Callers call it once.
 */
export function drainAndExit(
  close: () => Promise<void>,
  log: ShutdownLogger,
  reason: object,
  code: number,
): void {
  log.info(reason, 'shutting down')
  setTimeout(() => {
    log.error({ waitedMs: DRAIN_MS }, 'did not drain in time')
    process.exit(1)
  }, DRAIN_MS).unref()
  close().then(
    () => {
      log.info({}, 'shut down cleanly')
      process.exit(code)
    },
    (err: unknown) => {
      log.error({ err }, 'shutting down failed')
      process.exit(1)
    },
  )
}

/** An uncaught error's log fields (see uncaughtFields). */
export interface UncaughtFields {
  err: unknown
  /** `uncaughtException` or `unhandledRejection`. */
  origin: string
  /** For an 'error' event no listener took: the emitter's class, e.g. `Client`. */
  emitter?: string
  /** …and the stack of the emit() call, which says who emitted it. */
  emittedAt?: string
}

/**
 * The fields of the line that logs an uncaught error, so that the next one is found in
 * a minute: the error (pino's serializer gives its type, message, code, syscall and stack), where
 * it came from, and, for an unheard 'error' event, which emitter emitted it from where. A socket
 * error's own stack ends in Node's TCP read (`TCP.onStreamRead`) and names nobody.
 */
export function uncaughtFields(err: unknown, origin: string): UncaughtFields {
  const fields: UncaughtFields = { err, origin }
  if (!(err instanceof Error)) return fields
  const text = emittedErrorStack(err)
  if (text === undefined) return fields
  // "<the error's stack>\nEmitted 'error' event on Client instance at:\n    at …"
  const match = /\nEmitted 'error' event(?: on (.+?) instance)? at:\n/.exec(text)
  if (match === null) return fields
  fields.emitter = match[1] ?? 'EventEmitter'
  fields.emittedAt = text.slice(match.index + match[0].length)
  return fields
}

/**
 * D11: once the reader of stdout or stderr has gone (`serve 2>&1 | head -2`, a log collector
 * that died), each write there fails with EPIPE, and an 'error' event nothing listens for is an
 * uncaught error: the service would drain as failed and exit 1. The logger drops such lines
 * itself (observability/logging.ts); this drops what else is written there (a notice on stderr,
 * Node's own warnings). Any other failure of the two streams is still an uncaught error.
 */
export function dropWritesToGonePipes(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') throw err
    })
  }
}
