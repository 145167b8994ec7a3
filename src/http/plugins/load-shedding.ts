// D16: load shedding. When the event loop falls behind, every request already waits that long
// before any of our code runs for it, and taking on more makes all of them wait longer. So past a
// delay threshold, requests are answered at once with 503 `unavailable` and `Retry-After`
// (RFC 9110 §15.6.4, §10.2.3), which costs a fraction of serving them, instead of queueing.
//
// @fastify/under-pressure measures (perf_hooks' monitorEventLoopDelay, 10 ms resolution): at
// each sample it takes the mean loop delay since the previous sample, less the resolution, and
// until the next sample every request is shed or none is. Our `pressureHandler` decides how:
// /healthz is never shed (a liveness probe that failed under load would get a busy but healthy
// instance restarted, which adds load elsewhere); everything else, /readyz included, is. A
// readiness 503 makes a balancer send this instance less until it catches up.
//
// under-pressure is registered in a scope of its own that has no routes, so that its
// per-request hook, which reads Fastify's `request.routeOptions` (an object built anew on every
// read), never runs; our one hook asks it `isUnderPressure()`, a few comparisons, and goes on.
//
// The answer is sent from the hook, not thrown: the error handler logs every 5xx with its
// stack, which under overload would flood the log. Instead one line says shedding began and
// one, after a quiet spell, how many requests it shed.
import underPressure from '@fastify/under-pressure'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { type ErrorBody, errorBody } from '../../errors.ts'

export interface LoadSheddingOptions {
  /** PETSTORE_MAX_EVENT_LOOP_DELAY_MS: the mean delay, in ms, past which requests are shed; 0 turns it off. */
  maxEventLoopDelayMs: number
  /** Route URLs (as registered) that are always served: the liveness probe. */
  exempt?: readonly string[]
  /** An episode ends, for the log, once nothing was shed for this long; 5 s unless given (tests). */
  quietMs?: number
}

/** What the plugin counts, for logs now and metrics later. */
export interface LoadSheddingStats {
  /** Requests answered 503 by load shedding since the start. */
  readonly shed: number
  /** Whether requests are being shed now (as of the last sample). */
  readonly active: boolean
  /** The event loop delay of the last sample, in ms (Infinity: stalled); 0 when shedding is off. */
  readonly eventLoopDelayMs: number
}

declare module 'fastify' {
  interface FastifyInstance {
    loadShedding: LoadSheddingStats
  }
}

/**
 * How often the delay is sampled. The histogram records the gaps between its 10 ms ticks and
 * starts afresh at each sample, so a sample that spans fewer than two ticks has no gap and reads
 * as an infinite delay. With samples as long as the threshold that happens now and then even
 * when the loop turns in a third of it; with samples twice as long, not for turns well past half
 * of it, and longer turns read as what they are (docs/benchmarks.md, "Measurements behind
 * choices in the code").
 */
export function sampleIntervalMs(maxEventLoopDelayMs: number): number {
  return Math.max(20, 2 * maxEventLoopDelayMs)
}
/** The earliest the decision can change is the next sample, so clients are told the minimum. */
const RETRY_AFTER_SECONDS = 1

/** A shed request's 503: its Retry-After (seconds) and message; also the probe listener's (D20). */
export const SHED_ANSWER = {
  retryAfter: String(RETRY_AFTER_SECONDS),
  message: `the service is overloaded; retry after ${RETRY_AFTER_SECONDS} s`,
} as const
/** A shedding episode ends, for the log, once nothing was shed for this long. */
const QUIET_MS = 5_000
/** How often a running episode looks whether it has been quiet long enough. */
const QUIET_CHECK_MS = 1_000

type LoopGauge = Pick<FastifyInstance, 'isUnderPressure' | 'memoryUsage'>

/** under-pressure in a scope of its own, with no routes (above: why); its decorators. */
async function loopGauge(
  app: FastifyInstance,
  maxEventLoopDelayMs: number,
  sampleIntervalMs: number,
): Promise<LoopGauge> {
  let gauge: LoopGauge | undefined
  await app.register(async (scope) => {
    await scope.register(underPressure, {
      maxEventLoopDelay: maxEventLoopDelayMs,
      sampleInterval: sampleIntervalMs,
    })
    gauge = scope
  })
  if (gauge === undefined) throw new Error('under-pressure did not register')
  // Its two functions, not the scope: a Fastify instance is thenable, so a promise resolved
  // with it would wait for the instance instead.
  const { isUnderPressure, memoryUsage } = gauge
  return { isUnderPressure, memoryUsage }
}

export const loadShedding = fp<LoadSheddingOptions>(
  async (app, { maxEventLoopDelayMs, exempt = [], quietMs = QUIET_MS }) => {
    let shed = 0
    const interval = sampleIntervalMs(maxEventLoopDelayMs)
    const gauge =
      maxEventLoopDelayMs > 0 ? await loopGauge(app, maxEventLoopDelayMs, interval) : undefined
    // Starting (loading and compiling code, migrations) stalls the loop once, which is not
    // overload: without this, the first samples would shed an instance's first requests. The
    // verdicts count once a whole sample has been taken after the app was ready.
    let armedAt = Number.POSITIVE_INFINITY
    app.decorate('loadShedding', {
      get shed() {
        return shed
      },
      get active() {
        return performance.now() >= armedAt && (gauge?.isUnderPressure() ?? false)
      },
      get eventLoopDelayMs() {
        return gauge?.memoryUsage().eventLoopDelay ?? 0
      },
    })
    // Off: not registered at all, so nothing samples and no hook runs.
    if (gauge === undefined) return

    const exemptUrls = new Set(exempt)
    app.addHook('onReady', (done) => {
      armedAt = performance.now() + 2 * interval
      done()
    })
    const episode = { startedAt: 0, lastShedAt: 0, shedBefore: 0 }
    let watch: NodeJS.Timeout | undefined

    const endEpisodeWhenQuiet = () => {
      if (performance.now() - episode.lastShedAt < quietMs) return
      clearInterval(watch)
      watch = undefined
      app.log.info(
        {
          shedRequests: shed - episode.shedBefore,
          sheddingForMs: Math.round(episode.lastShedAt - episode.startedAt),
        },
        `load shedding ended: the event loop has kept up for ${quietMs / 1000} s`,
      )
    }

    const pressureHandler = (
      request: FastifyRequest,
      reply: FastifyReply,
      delayMs: number,
    ): ErrorBody | undefined => {
      const now = performance.now()
      if (now < armedAt) return undefined // served as usual
      if (request.routeOptions.url !== undefined && exemptUrls.has(request.routeOptions.url)) {
        return undefined
      }
      shed += 1
      episode.lastShedAt = now
      if (watch === undefined) {
        episode.startedAt = now
        episode.shedBefore = shed - 1
        watch = setInterval(endEpisodeWhenQuiet, Math.min(QUIET_CHECK_MS, quietMs)).unref()
        app.log.warn(
          {
            // null: the loop did not turn twice within a sample, i.e. it is stalled.
            eventLoopDelayMs: Number.isFinite(delayMs) ? Math.round(delayMs) : null,
            maxEventLoopDelayMs,
          },
          'load shedding: the event loop is behind; requests get 503 until it catches up',
        )
      }
      reply.code(503).header('retry-after', SHED_ANSWER.retryAfter)
      return errorBody('unavailable', SHED_ANSWER.message)
    }

    app.addHook('onClose', (_app, done) => {
      clearInterval(watch)
      done()
    })

    app.addHook('onRequest', function shedWhenBehind(request, reply, done) {
      if (!gauge.isUnderPressure()) {
        done()
        return
      }
      const answer = pressureHandler(request, reply, gauge.memoryUsage().eventLoopDelay)
      if (answer === undefined) done()
      else reply.send(answer)
    })
  },
  { name: 'load-shedding' },
)
