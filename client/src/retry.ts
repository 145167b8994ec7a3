// When to retry and how long to wait first.
import type { PetstoreError } from './errors.ts'

export interface RetryPolicy {
  /** Retries after the first attempt. */
  maxRetries: number
  /** The first retry's backoff ceiling; it doubles with each retry. */
  baseDelayMs: number
  /** No wait is longer than this, `Retry-After` included. */
  maxDelayMs: number
  /** A number in [0, 1), as Math.random gives. */
  random: () => number
}

/** Waits `ms`, or rejects with the signal's reason as soon as it aborts. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>

/** Statuses that say "try again later": the request was not carried out. */
const RETRYABLE_STATUSES = new Set([429, 503])

/**
 * Whether a failed attempt may be sent again. Every call is safe to repeat: reads change
 * nothing, and a create always carries an Idempotency-Key, so a repeat replays the first.
 * 409 `idempotency_key_in_use`: the first attempt with this key is still running.
 */
export function isRetryable(error: PetstoreError): boolean {
  return (
    error.code === 'network_error' ||
    error.code === 'timeout' ||
    error.code === 'idempotency_key_in_use' ||
    RETRYABLE_STATUSES.has(error.status)
  )
}

/**
 * The wait before retry number `retry` (0 for the first): exponential backoff with full
 * jitter (a uniform draw below min(cap, base × 2^retry)), so that clients failed by the same
 * outage do not come back in step; never less than `Retry-After`, never more than the cap.
 * Undefined when `Retry-After` asks for longer than the cap: a retry sooner would be refused
 * again, so the error goes to the caller, with its `retryAfter`.
 */
export function backoffDelayMs(
  policy: RetryPolicy,
  retry: number,
  retryAfterSeconds: number | undefined,
): number | undefined {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** retry)
  const jittered = policy.random() * ceiling
  if (retryAfterSeconds === undefined) return jittered
  const floor = retryAfterSeconds * 1000
  if (floor > policy.maxDelayMs) return undefined
  return Math.max(floor, jittered)
}

/** The default Sleep: a timer that an abort clears. */
export const sleep: Sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason)
      return
    }
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
