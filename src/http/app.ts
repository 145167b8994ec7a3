// buildApp: the Fastify instance from injected parts (config, store, key verifier, clock).
// It never listens. Every caller (the process, tests, scripts) builds it through process/compose.ts.
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { type FastifyServerOptions, LogController } from 'fastify'
import { type Clock, systemClock } from '../clock.ts'
import type { Config } from '../config.ts'
import { BODY_LIMIT_BYTES, IDEMPOTENCY_TTL_DEFAULT_SECONDS } from '../contract/limits.ts'
import { sharedSchemas } from '../contract/schemas.ts'
import type { KeyVerifier } from '../keys/verifier.ts'
import type { Lifecycle } from '../lifecycle.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { Tracing } from '../observability/tracing/installed.ts'
import { AuthFailureLimit } from '../rate-limit/auth-failures.ts'
import { trustedHops } from '../rate-limit/client-address.ts'
import { MemoryWindowCounter, type WindowCounter } from '../rate-limit/counter.ts'
import { IdempotencyPurge } from '../store/idempotency-purge.ts'
import type { Store } from '../store/store.ts'
import type { AuthFailureOptions } from './plugins/auth.ts'
import { compression } from './plugins/compression.ts'
import { draining } from './plugins/draining.ts'
import { errorHandling, frameworkErrors, methodNotAllowed } from './plugins/errors.ts'
import { jsonBody } from './plugins/json-body.ts'
import { type LoadSheddingOptions, loadShedding } from './plugins/load-shedding.ts'
import { httpMetrics } from './plugins/metrics.ts'
import { openapi } from './plugins/openapi.ts'
import { operations } from './plugins/operations.ts'
import { RATE_LIMIT_WINDOW_SECONDS, rateLimitCheck } from './plugins/rate-limit.ts'
import { requestId } from './plugins/request-id.ts'
import { INFO_OR_LOWER, requestLog } from './plugins/request-log.ts'
import { security, securityHeaders } from './plugins/security.ts'
import { staging } from './plugins/staging.ts'
import { healthRoutes, LIVENESS_PATH } from './routes/health.ts'
import { petRoutes } from './routes/pets.ts'
import { rootRoutes } from './routes/root.ts'
import { formatValidationErrors, validatorCompiler } from './validation.ts'

export interface AppParts {
  /** Without idempotencyTtlSeconds, Idempotency-Key records live 24 hours (D14). */
  config: Pick<Config, 'rateLimit' | 'corsOrigins'> &
    Partial<
      Pick<
        Config,
        'idempotencyTtlSeconds' | 'trustedProxies' | 'authFailureLimit' | 'env' | 'stagingFaults'
      >
    >
  store: Store
  verifier: KeyVerifier
  clock?: Clock
  rateLimitCounter?: WindowCounter
  /** D3: failed authentications per address, counted in memory unless given (Redis's). */
  authFailureCounter?: WindowCounter
  lifecycle?: Lifecycle
  /** D16: off unless given; compose.ts passes PETSTORE_MAX_EVENT_LOOP_DELAY_MS. */
  loadShedding?: Omit<LoadSheddingOptions, 'exempt'>
  /** Fastify's logger option; off unless given. */
  logger?: FastifyServerOptions['logger']
  /**
   * The HTTP server and its HTTP-layer errors (http-server.ts, D16). compose.ts gives them;
   * without them Fastify makes a plain node:http server.
   */
  http?: Pick<FastifyServerOptions, 'serverFactory' | 'clientErrorHandler'>
  /** D17: where the app's figures go (metrics.ts); none are taken unless given. */
  metrics?: Metrics
  /** D23: tracing's parts, when it is on (observability/tracing/start.ts). */
  tracing?: Tracing
  /** D29: the random faults' draws in staging; Math.random unless given. */
  random?: () => number
}

export async function buildApp(parts: AppParts) {
  const { config, store, verifier } = parts
  const clock = parts.clock ?? systemClock
  const lifecycle = parts.lifecycle ?? { draining: false }
  const idempotencyTtlSeconds = config.idempotencyTtlSeconds ?? IDEMPOTENCY_TTL_DEFAULT_SECONDS

  const app = Fastify({
    ...parts.http,
    logger: parts.logger ?? false,
    // One line per request, ours (plugins/request-log.ts), instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: requestId,
    bodyLimit: BODY_LIMIT_BYTES,
    // request.ip: X-Forwarded-For is believed only as far back as the hops an operator named
    // (PETSTORE_TRUSTED_PROXIES), a hop's port set aside; a client's own header never chooses
    // it. Read through clientAddress (rate-limit/client-address.ts), without its port (D3, D8).
    trustProxy: config.trustedProxies?.length ? trustedHops(config.trustedProxies) : false,
    // While closing, requests on open connections are still served (D11: nothing accepted is
    // lost); readiness already says 503 so no new traffic is sent.
    return503OnClosing: false,
    schemaErrorFormatter: formatValidationErrors,
    frameworkErrors: frameworkErrors(securityHeaders()),
  }).withTypeProvider<TypeBoxTypeProvider>()
  // Ajv from the contract, with the shared schemas the routes refer to by `$ref`.
  app.setValidatorCompiler(validatorCompiler(sharedSchemas))

  // D23: first, so that its instrumentation sees every route as it is added. Loaded only when
  // tracing is on: it imports OpenTelemetry.
  const { tracing } = parts
  if (tracing !== undefined) {
    const { tracing: tracingPlugin } = await import('./plugins/tracing.ts')
    await app.register(tracingPlugin, { fastifyOtel: tracing.fastifyOtel })
  }

  // D16: the store says once in this log when the database fails and when it works again.
  store.reportOutagesTo(app.log)
  const { metrics } = parts
  if (metrics !== undefined) {
    store.observe(metrics.store)
    // First, so that every answer is timed, whichever hook gave it.
    await app.register(httpMetrics, { metrics })
  }

  // D17: the per-request line is written at info; at warn and above, no hook runs for it.
  if (parts.logger && INFO_OR_LOWER.has(app.log.level)) {
    await app.register(requestLog, {
      tracing: tracing !== undefined,
      trustsForwarding: (config.trustedProxies?.length ?? 0) > 0,
    })
  }

  const rejectOtherMethods = methodNotAllowed(app)
  // The shared schemas, for the serializer and the OpenAPI document (the validator has its own).
  for (const schema of sharedSchemas) app.addSchema(schema)

  // Before any route: the plugin attaches itself to each route as it is added (D17).
  await app.register(compression)
  await app.register(errorHandling)
  await app.register(security, { corsOrigins: config.corsOrigins })
  // After the request id and security headers, so a shed request carries them too; before
  // anything that costs (auth, the store), so shedding is cheap. /healthz is never shed (D16).
  await app.register(loadShedding, {
    maxEventLoopDelayMs: 0,
    ...parts.loadShedding,
    exempt: [LIVENESS_PATH],
  })
  metrics?.loadShedFrom(() => app.loadShedding.shed)
  await app.register(jsonBody)
  await app.register(openapi)
  await app.register(draining, { lifecycle })
  await app.register(healthRoutes, { store, lifecycle })
  await app.register(rootRoutes)

  // The operations, each behind its steps: constant headers, auth, rate limit, sunset.
  const rateLimit = rateLimitCheck({
    quota: config.rateLimit,
    windowSeconds: RATE_LIMIT_WINDOW_SECONDS,
    counter: parts.rateLimitCounter ?? new MemoryWindowCounter(),
    clock,
    ...(metrics ? { observer: metrics.rateLimit } : {}),
  })
  const authFailures = authFailureLimit(config.authFailureLimit ?? 0, parts, clock, metrics)
  await app.register(
    async (api) => {
      await api.register(operations, { verifier, authFailures, clock, rateLimit })
      // D29: only in staging; production has no trace of it, so it ignores Prefer.
      if (config.env === 'staging') {
        await api.register(staging, {
          faults: config.stagingFaults,
          clock,
          rateLimitWindowSeconds: RATE_LIMIT_WINDOW_SECONDS,
          ...(parts.random ? { random: parts.random } : {}),
          ...(metrics ? { observer: metrics.staging } : {}),
        })
      }
      await api.register(petRoutes, { store, clock, idempotencyTtlSeconds })
    },
    { prefix: '/v1' },
  )

  await app.register(rejectOtherMethods)

  // D14: expired Idempotency-Key records are deleted in the background while the app runs.
  const purge = new IdempotencyPurge({
    pets: store.pets,
    clock,
    ttlSeconds: idempotencyTtlSeconds,
  })
  app.addHook('onReady', async () => purge.start())
  app.addHook('preClose', () => purge.stop())
  return app
}

/**
 * D3: failed authentications a minute per client address, or undefined when the limit is 0. In
 * memory a count is kept for at most 100,000 addresses a minute (rate-limit/counter.ts).
 */
function authFailureLimit(
  limit: number,
  parts: Pick<AppParts, 'authFailureCounter'>,
  clock: Clock,
  metrics: Metrics | undefined,
): AuthFailureOptions | undefined {
  if (limit === 0) return undefined
  return {
    limit: new AuthFailureLimit({
      limit,
      windowSeconds: 60,
      counter: parts.authFailureCounter ?? new MemoryWindowCounter(100_000),
      clock,
      ...(metrics ? { health: metrics.authFailures } : {}),
    }),
    ...(metrics ? { observer: metrics.authFailures } : {}),
  }
}
