import type { ErrorCode } from './contract.ts'

/**
 * Codes this client gives when the service's own error body did not arrive. The service never
 * sends them:
 *
 * - `network_error` (status 0): no answer came (connection refused or reset, DNS failure, …),
 *   after the last retry.
 * - `timeout` (status 0): an attempt took longer than `timeoutMs`, after the last retry.
 * - `invalid_response` (the HTTP status): an answer came but not as the service documents it,
 *   e.g. a proxy's HTML 502 page, or a success whose body is not the expected JSON.
 */
export type ClientErrorCode = 'network_error' | 'timeout' | 'invalid_response'

/** Every code a {@link PetstoreError} can carry: the service's, then the client's own. */
export type PetstoreErrorCode = ErrorCode | ClientErrorCode

/** The key's budget, from the draft-ietf-httpapi-ratelimit-headers-10 `RateLimit` field. */
export interface RateLimit {
  /** Requests left in the current window (`r`). */
  remaining: number
  /** Seconds until the window resets (`t`). */
  reset: number
}

export interface PetstoreErrorDetails {
  status: number
  code: PetstoreErrorCode
  message: string
  requestId?: string | undefined
  retryAfter?: number | undefined
  rateLimit?: RateLimit | undefined
  cause?: unknown
}

/** Every failure of a call, once retries are spent: the service's error or the client's own. */
export class PetstoreError extends Error {
  /** The HTTP status; 0 when no answer came (`network_error`, `timeout`). */
  readonly status: number
  readonly code: PetstoreErrorCode
  /** The service's `X-Request-Id`, which its logs carry too; absent when no answer came. */
  readonly requestId: string | undefined
  /** `Retry-After`, in seconds, when the answer had one. */
  readonly retryAfter: number | undefined
  readonly rateLimit: RateLimit | undefined

  constructor(details: PetstoreErrorDetails) {
    super(details.message, details.cause === undefined ? undefined : { cause: details.cause })
    this.name = 'PetstoreError'
    this.status = details.status
    this.code = details.code
    this.requestId = details.requestId
    this.retryAfter = details.retryAfter
    this.rateLimit = details.rateLimit
  }
}
