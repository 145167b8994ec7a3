// The one place the service's parts are put together into an app: the key verifier over the
// store and the configured keys, the HTTP server's parts, load shedding and the logger, all
// from the Config. The running process (instance.ts), the test harness (test/helpers/server.ts)
// and the scripts (write-openapi.ts, the benchmark) build their apps here, so that what they
// run is wired as the service is; each gives only what it owns (the store, and for tests a
// clock or a logger of their own).
import type { Clock } from '../clock.ts'
import type { Config } from '../config.ts'
import { type AppParts, buildApp } from '../http/app.ts'
import { httpServerParts } from '../http/http-server.ts'
import { securityHeaders } from '../http/plugins/security.ts'
import { createKeyVerifier } from '../keys/verifier.ts'
import type { Lifecycle } from '../lifecycle.ts'
import { logDestination, loggerOptions } from '../observability/logging.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { Tracing } from '../observability/tracing/installed.ts'
import type { WindowCounter } from '../rate-limit/counter.ts'
import type { Store } from '../store/store.ts'

/** What a caller owns and hands in; everything else comes from the Config. */
export interface OwnParts {
  lifecycle?: Lifecycle
  /** D12: counted in memory unless given (instance.ts gives Redis's when REDIS_URL is set). */
  rateLimitCounter?: WindowCounter
  /** D3: failed authentications per address; in memory unless given, like rateLimitCounter. */
  authFailureCounter?: WindowCounter
  /** D17: no figures are taken unless given. */
  metrics?: Metrics
  /** D23: no spans are made unless given (instance.ts gives them when tracing is on). */
  tracing?: Tracing
  /** Tests move time by hand. */
  clock?: Clock
  /**
   * Fastify's logger option; the Config's (loggerOptions, to logDestination) unless given, `false`
   * for none.
   */
  logger?: AppParts['logger']
  /** D16: for tests, how soon a shedding episode ends in the log. */
  loadSheddingQuietMs?: number
  /** D29: for tests, the draws of staging's random faults. */
  random?: () => number
}

export type ComposedApp = Awaited<ReturnType<typeof buildApp>>

export function composeApp(
  config: Readonly<Config>,
  store: Store,
  own: OwnParts = {},
): Promise<ComposedApp> {
  return buildApp({
    config,
    store,
    verifier: createKeyVerifier({
      env: config.env,
      apiKeys: store.apiKeys,
      bootstrapKeys: config.apiKeys,
      cacheMs: config.keyCacheMs,
      ...(own.clock ? { clock: own.clock } : {}),
      ...(own.metrics ? { observer: own.metrics.keyLookups } : {}),
    }),
    loadShedding: {
      maxEventLoopDelayMs: config.maxEventLoopDelayMs,
      ...(own.loadSheddingQuietMs === undefined ? {} : { quietMs: own.loadSheddingQuietMs }),
    },
    logger:
      own.logger === undefined
        ? { ...loggerOptions(config), stream: logDestination() }
        : own.logger,
    http: httpServerParts(config.connections, securityHeaders()),
    ...(own.lifecycle ? { lifecycle: own.lifecycle } : {}),
    ...(own.rateLimitCounter ? { rateLimitCounter: own.rateLimitCounter } : {}),
    ...(own.authFailureCounter ? { authFailureCounter: own.authFailureCounter } : {}),
    ...(own.metrics ? { metrics: own.metrics } : {}),
    ...(own.tracing ? { tracing: own.tracing } : {}),
    ...(own.clock ? { clock: own.clock } : {}),
    ...(own.random ? { random: own.random } : {}),
  })
}
