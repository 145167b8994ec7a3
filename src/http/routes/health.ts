// D1: unauthenticated probes for orchestrators and load balancers.
//   /healthz: the process is alive.  /readyz: the store answers (and, while its writes fail, can
//   be written: D16) and the process is not draining. A 503 carries Retry-After like every 503.
// The answers are made here once, for the API's port and for the probe listener (D20).
import type { FastifyPluginAsync } from 'fastify'
import { errorBody } from '../../errors.ts'
import type { Lifecycle } from '../../lifecycle.ts'
import { type Store, StoreUnavailableError } from '../../store/store.ts'

/** The liveness probe (D1), never shed (D16). */
export const LIVENESS_PATH = '/healthz'
export const READINESS_PATH = '/readyz'

/** A probe's answer, whichever listener sends it. */
export interface ProbeAnswer {
  statusCode: 200 | 503
  /** Seconds, on a 503. */
  retryAfter?: string
  body: object
}

export const ALIVE: ProbeAnswer = { statusCode: 200, body: { status: 'ok' } }

interface WarnLogger {
  warn(fields: object, message: string): void
}

function unavailable(retryAfter: string, message: string): ProbeAnswer {
  return { statusCode: 503, retryAfter, body: errorBody('unavailable', message) }
}

/** Before the API's port listens: the probe listener (D20) is bound first. */
export const STARTING: ProbeAnswer = unavailable('1', 'the service is starting')

/** While it drains (D11). */
export const SHUTTING_DOWN: ProbeAnswer = unavailable('1', 'the service is shutting down')

/** Whether this process should be sent requests now (D1, D11, D16). */
export async function readiness(
  store: Store,
  lifecycle: Lifecycle,
  log: WarnLogger,
): Promise<ProbeAnswer> {
  if (lifecycle.draining) return SHUTTING_DOWN
  try {
    await store.ping()
  } catch (err) {
    // The store has logged its outage already (once, not once a probe).
    if (err instanceof StoreUnavailableError) {
      return unavailable(String(err.retryAfterSeconds), err.reason)
    }
    log.warn({ err }, 'readiness: the database is unreachable')
    return unavailable('1', 'the database is unreachable')
  }
  return { statusCode: 200, body: { status: 'ready' } }
}

export const healthRoutes: FastifyPluginAsync<{ store: Store; lifecycle: Lifecycle }> = async (
  app,
  { store, lifecycle },
) => {
  // D23: probes make no spans (`otel` is read only while tracing is on).
  const untraced = { config: { otel: false } }
  app.get(LIVENESS_PATH, untraced, async () => ALIVE.body)

  app.get(READINESS_PATH, untraced, async (request, reply) => {
    const answer = await readiness(store, lifecycle, request.log)
    if (answer.retryAfter !== undefined) reply.header('retry-after', answer.retryAfter)
    return reply.code(answer.statusCode).send(answer.body)
  })
}
