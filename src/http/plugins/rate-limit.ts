// D12: a per-key request budget in fixed windows of one minute. Every authenticated response
// states it in the IETF draft-ietf-httpapi-ratelimit-headers-10 fields; over it, 429 with
// Retry-After (RFC 9110 §10.2.3).
//
// @fastify/rate-limit writes only the older X-RateLimit-* / RateLimit-Limit headers, not the
// draft-10 structured fields D12 asks for, so the counting is done here: it is a few lines over
// a WindowCounter (rate-limit/counter.ts in memory, rate-limit/redis.ts shared).
//
// Fail open: when the counter fails (Redis unreachable or slow), the request goes through
// unlimited. The limit protects the service from a client; it must not turn an outage of its
// own helper into an outage of the API. Such a response carries RateLimit-Policy (the policy
// still holds) but no RateLimit field, since the remaining budget is unknown.
import type { onRequestAsyncHookHandler } from 'fastify'
import type { Clock } from '../../clock.ts'
import { ApiError } from '../../errors.ts'
import type { RateLimitObserver } from '../../observability/metrics.ts'
import { OutageLog, type OutageMessages } from '../../outage-log.ts'
import type { WindowCounter } from '../../rate-limit/counter.ts'

export interface RateLimitOptions {
  /** Requests per window per key; 0 turns the limit off. */
  quota: number
  windowSeconds: number
  counter: WindowCounter
  clock: Clock
  /** D17: 429s and fail-open state, for metrics. */
  observer?: RateLimitObserver
}

/** How an outage of the counter reads in the log: requests go through unlimited meanwhile. */
export const COUNTER_OUTAGE: OutageMessages = {
  level: 'warn',
  started: 'rate limit counter unreachable; requests are let through without a limit (fail open)',
  continuing: 'rate limit counter still unreachable; requests are let through without a limit',
  ended: 'rate limit counter reachable again; limits apply again',
  countField: 'requestsLetThrough',
}

/** D12: budgets are per minute. */
export const RATE_LIMIT_WINDOW_SECONDS = 60

/** Whole seconds from `now` (ms) to the end of its fixed window: the draft's `t`, Retry-After. */
export function secondsToWindowEnd(now: number, windowSeconds: number): number {
  const windowMs = windowSeconds * 1000
  return Math.ceil(((Math.floor(now / windowMs) + 1) * windowMs - now) / 1000)
}

/**
 * The operations' check after auth (plugins/operations.ts): it counts the request against its
 * key's budget. With a quota of 0 there is no limit and no check: undefined.
 */
export function rateLimitCheck({
  quota,
  windowSeconds,
  counter,
  clock,
  observer,
}: RateLimitOptions): onRequestAsyncHookHandler | undefined {
  if (quota === 0) return undefined
  const policy = `"default";q=${quota};w=${windowSeconds}`
  const windowMs = windowSeconds * 1000
  const outages = new OutageLog(clock, COUNTER_OUTAGE)

  return async function rateLimit(request, reply) {
    const now = clock.now()
    const window = Math.floor(now / windowMs)
    let used: number
    try {
      used = await counter.hit(request.apiKeyId, window, windowSeconds)
    } catch (err) {
      outages.failed(request.log, err)
      observer?.failingOpen(true)
      reply.header('ratelimit-policy', policy)
      return
    }
    outages.succeeded(request.log)
    observer?.failingOpen(false)
    const resetSeconds = secondsToWindowEnd(now, windowSeconds)
    const headers = {
      'ratelimit-policy': policy,
      ratelimit: `"default";r=${Math.max(0, quota - used)};t=${resetSeconds}`,
    }
    if (used > quota) {
      observer?.limited()
      throw new ApiError(
        'rate_limited',
        `this API key has used its ${quota} requests for this minute; retry in ${resetSeconds} s`,
        { ...headers, 'retry-after': String(resetSeconds) },
      )
    }
    reply.headers(headers)
  }
}
