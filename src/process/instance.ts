// One instance of the service in this process: the store, the app, its listeners (the API;
// /metrics, unless a cluster primary serves it; the probes, with PROBE_PORT), and close() that
// drains them (D11). A lone `serve` runs one; `serve --workers N` runs one in each worker
// (cluster.ts).

import type { Config } from '../config.ts'
import { logAcceptErrors, logDroppedConnections } from '../http/http-server.ts'
import { readiness, STARTING } from '../http/routes/health.ts'
import type { Lifecycle } from '../lifecycle.ts'
import { answerClusterScrapes, createMetrics } from '../observability/metrics.ts'
import { listenForScrapes, type MetricsServer } from '../observability/metrics-server.ts'
import { installedTracing } from '../observability/tracing/installed.ts'
import { AUTH_FAILURES_NAMESPACE } from '../rate-limit/auth-failures.ts'
import { MemoryWindowCounter, type WindowCounter } from '../rate-limit/counter.ts'
import { openStore } from '../store/open.ts'
import { type ComposedApp, composeApp } from './compose.ts'
import { FIRST_KEY_FAILED, offerFirstKey } from './prepare.ts'
import { listenForProbes, type ProbeServer } from './probe-server.ts'
import { prepareSchema } from './schema.ts'

type App = ComposedApp

/**
 * D12, D3: request budgets and failed authentications are counted in Redis when REDIS_URL is set
 * (and either limit is on), on one connection, else in memory. The Redis client is loaded only
 * then, like the PostgreSQL driver. `announce` says where counters live, once the app's logger
 * exists; it waits briefly for Redis, so that a normal start does not fail open.
 */
async function counters(config: Pick<Config, 'redis' | 'rateLimit' | 'authFailureLimit'>): Promise<{
  rateLimitCounter: WindowCounter
  authFailureCounter?: WindowCounter
  announce(app: App): Promise<void>
}> {
  const { redis } = config
  if (redis === undefined || (config.rateLimit === 0 && config.authFailureLimit === 0)) {
    return { rateLimitCounter: new MemoryWindowCounter(), announce: async () => {} }
  }
  const { RedisWindowCounter, redactRedisUrl } = await import('../rate-limit/redis.ts')
  const counter = new RedisWindowCounter(redis)
  const announce = async (app: App) => {
    const reachable = await counter.whenReady(1000)
    app.log.info(
      { redis: redactRedisUrl(redis.url), prefix: redis.prefix, reachable },
      reachable
        ? 'rate limits and failed authentications are counted in Redis, shared by every instance that uses it'
        : 'rate limits and failed authentications are counted in Redis, which is not reachable yet: they go uncounted until it is',
    )
  }
  return {
    rateLimitCounter: counter,
    authFailureCounter: counter.sibling(AUTH_FAILURES_NAMESPACE),
    announce,
  }
}

export interface Instance {
  app: App
  listen(): Promise<void>
  /** D11: readiness 503, in-flight requests finish, the store closes. Runs once; idempotent. */
  close(): Promise<void>
}

export interface InstanceOptions {
  /** Migrations and the first-start key are the cluster primary's. */
  prepared?: boolean
  /**
   * A cluster worker: the primary serves `/metrics` for every worker (D17), so this instance
   * answers the primary's requests for its figures instead of listening for scrapes.
   */
  clusterWorker?: boolean
}

/**
 * Connections the kernel may hold for us before accept (D16). Node's default, 511, overflowed
 * under 2,000 connecting clients, and a dropped SYN is retried only after 1 s, then 3 s; the
 * kernel caps this at net.core.somaxconn (4096 on current Linux).
 */
const LISTEN_BACKLOG = 4096

/** Opens the store and builds the app; does not listen yet. */
export async function startInstance(
  config: Readonly<Config>,
  options: InstanceOptions = {},
): Promise<Instance> {
  // D23: installed by bin/petstore.js when an OTLP endpoint is set; PostgreSQL is traced by pg's
  // instrumentation, SQLite by the store's own spans.
  const tracing = installedTracing()
  const opened = await openStore(config.database)
  const store =
    tracing !== undefined && config.database.engine === 'sqlite'
      ? tracing.traceStore(opened)
      : opened
  const schemaNotices = options.prepared
    ? []
    : await prepareSchema(store, config).catch(async (err: unknown) => {
        // Any failure to prepare the schema (D27: refused, pending, unreachable) ends the start
        // here, with the store closed.
        await store.close()
        throw err
      })
  const lifecycle: Lifecycle = { draining: false }
  const { rateLimitCounter, authFailureCounter, announce } = await counters(config)
  // D17: no figures are taken at all with METRICS_PORT=off.
  const metrics = config.metrics === undefined ? undefined : createMetrics()
  if (metrics !== undefined && options.clusterWorker) answerClusterScrapes(metrics.registry)
  const app = await composeApp(config, store, {
    rateLimitCounter,
    ...(authFailureCounter ? { authFailureCounter } : {}),
    lifecycle,
    ...(metrics ? { metrics } : {}),
    ...(tracing ? { tracing } : {}),
  })
  // D17: the readiness gauge answers as /readyz would, asked when Prometheus scrapes.
  metrics?.readinessFrom(
    async () => (await readiness(store, lifecycle, app.log)).statusCode === 200,
  )
  for (const notice of schemaNotices) app.log[notice.level](notice.fields, notice.message)
  logDroppedConnections(app.server, app.log)
  await announce(app)

  let closing: Promise<void> | undefined
  let metricsServer: MetricsServer | undefined
  let probeServer: ProbeServer | undefined
  const closeSideListeners = async () => {
    await metricsServer?.close()
    await probeServer?.close()
  }
  return {
    app,
    listen: async () => {
      // Every listener is bound before any is said to listen (Fastify logs "Server listening"
      // as its own binds): a METRICS_PORT or PROBE_PORT in use stops the start having said
      // nothing, and a PORT in use closes the others again.
      try {
        if (metrics !== undefined && config.metrics !== undefined && !options.clusterWorker) {
          const { registry } = metrics
          metricsServer = await listenForScrapes(
            config.metrics,
            { contentType: registry.contentType, body: () => registry.metrics() },
            app.log,
          )
        }
        if (config.probes !== undefined) {
          probeServer = await listenForProbes(
            config.probes,
            {
              // Bound before the API's port: not ready until that listens too.
              ready: () =>
                app.server.listening
                  ? readiness(store, lifecycle, app.log)
                  : Promise.resolve(STARTING),
              shedding: () => app.loadShedding.active,
              draining: () => lifecycle.draining,
            },
            app.log,
            {
              ownSocketPerProcess: options.clusterWorker === true,
              stallMs: config.livenessStallMs,
            },
          )
        }
        await app.listen({ port: config.port, host: config.host, backlog: LISTEN_BACKLOG })
      } catch (err) {
        await closeSideListeners()
        throw err
      }
      tracing?.attach(app.log)
      logAcceptErrors(app.server, app.log)
      metricsServer?.announce()
      probeServer?.announce()
      // A store that fails here is an outage the requests will meet too; the server serves on.
      if (!options.prepared) {
        await offerFirstKey(store.apiKeys, config, app.log).catch((err: unknown) =>
          app.log.error({ err }, FIRST_KEY_FAILED),
        )
      }
    },
    close: () => {
      closing ??= (async () => {
        lifecycle.draining = true
        // The probe thread says 503 before the API's port closes, not at its next heartbeat.
        probeServer?.publish()
        await app.close()
        // After the drain, so that a scrape during it still sees the figures and a probe
        // during it is told 503, not refused.
        await closeSideListeners()
        await store.close()
        await rateLimitCounter.close()
        // Last, so that the drain's spans go too; bounded (tracing/start.ts).
        await tracing?.shutdown()
      })()
      return closing
    },
  }
}
