// D23: what the rest of the service sees of tracing. This module imports nothing of
// OpenTelemetry: with tracing off (no OTLP endpoint set) it is all that is loaded, and
// `installedTracing()` is undefined. With tracing on, start.ts installs the parts before any
// app is built (bin/petstore.js loads it first), and the instance puts them in place.
import type { FastifyPluginCallback } from 'fastify'
import type { Store } from '../../store/store.ts'

/** Where tracing says what happens to its spans (the app's logger once there is one). */
export interface TracingLog {
  info(fields: object, message: string): void
  warn(fields: object, message: string): void
}

export interface Tracing {
  /**
   * @fastify/otel's plugin, which the app's tracing plugin registers (http/plugins/tracing.ts),
   * following a caller's trace context only from a trusted peer (caller-context.ts).
   */
  readonly fastifyOtel: FastifyPluginCallback
  /** The store with a span around each statement batch (SQLite; pg is traced by its driver). */
  traceStore(store: Store): Store
  /** Once the API listens: where tracing logs from now on. */
  attach(log: TracingLog): void
  /** Exports what is queued, within a bounded time; never rejects. */
  shutdown(): Promise<void>
}

let installed: Tracing | undefined

export function installTracing(tracing: Tracing): void {
  installed = tracing
}

export function installedTracing(): Tracing | undefined {
  return installed
}
