// D1: unauthenticated probes for orchestrators and load balancers.
//   /healthz: the process is alive.  /readyz: the store answers and the process is not draining.
import type { FastifyPluginAsync } from 'fastify'
import { errorBody } from '../errors.ts'
import type { Store } from '../store/store.ts'

export interface Lifecycle {
  /** Set on SIGTERM/SIGINT (D11): readiness fails so load balancers stop sending traffic. */
  draining: boolean
}

export const healthRoutes: FastifyPluginAsync<{ store: Store; lifecycle: Lifecycle }> = async (
  app,
  { store, lifecycle },
) => {
  app.get('/healthz', async () => ({ status: 'ok' }))

  app.get('/readyz', async (request, reply) => {
    if (lifecycle.draining) {
      return reply.code(503).send(errorBody('unavailable', 'the service is shutting down'))
    }
    try {
      await store.ping()
    } catch (err) {
      request.log.warn({ err }, 'readiness: the database is unreachable')
      return reply.code(503).send(errorBody('unavailable', 'the database is unreachable'))
    }
    return { status: 'ready' }
  })
}
