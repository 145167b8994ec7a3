// D1: unauthenticated probes for orchestrators and load balancers.
//   /healthz: the process is alive.  /readyz: the store answers (and, while its writes fail, can
//   be written: D16) and the process is not draining. A 503 carries Retry-After like every 503.
import type { FastifyPluginAsync } from 'fastify'
import { errorBody } from '../errors.ts'
import type { Lifecycle } from '../lifecycle.ts'
import { type Store, StoreUnavailableError } from '../store/store.ts'

/** The liveness probe (D1), never shed (D16). */
export const LIVENESS_PATH = '/healthz'

export const healthRoutes: FastifyPluginAsync<{ store: Store; lifecycle: Lifecycle }> = async (
  app,
  { store, lifecycle },
) => {
  app.get(LIVENESS_PATH, async () => ({ status: 'ok' }))

  app.get('/readyz', async (request, reply) => {
    if (lifecycle.draining) {
      return reply
        .code(503)
        .header('retry-after', '1')
        .send(errorBody('unavailable', 'the service is shutting down'))
    }
    try {
      await store.ping()
    } catch (err) {
      // The store has logged its outage already (once, not once a probe).
      if (err instanceof StoreUnavailableError) {
        return reply
          .code(503)
          .header('retry-after', String(err.retryAfterSeconds))
          .send(errorBody('unavailable', err.reason))
      }
      request.log.warn({ err }, 'readiness: the database is unreachable')
      return reply
        .code(503)
        .header('retry-after', '1')
        .send(errorBody('unavailable', 'the database is unreachable'))
    }
    return { status: 'ready' }
  })
}
