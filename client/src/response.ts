// What the service said beside the value of a successful call, read from its answer's fields:
// `pets.withResponse.*` returns it next to the data, so that a caller can quote the request id,
// watch the budget or see a deprecation without a `fetch` of its own.
import { parseRateLimit, splitOutsideQuotes } from './headers.ts'
import type { Answer } from './transport.ts'

/**
 * The key's budget (draft-ietf-httpapi-ratelimit-headers-10): `RateLimit` (what is left) and
 * `RateLimit-Policy` (the quota), both RFC 9651 structured-field lists of named policies.
 */
export interface RateLimitBudget {
  /** The policy the figures are for, e.g. `default` (the item's string, unquoted). */
  policy: string
  /** Requests left in the current window (`r`). */
  remaining: number
  /** Seconds until the window resets (`t`). */
  reset: number
  /** Requests a window allows (`q` of the same policy in `RateLimit-Policy`), when stated. */
  quota: number | undefined
  /** The window's length in seconds (`w`), when stated. */
  window: number | undefined
}

/** A successful answer's metadata, parsed; `headers` holds every field as it came. */
export interface ResponseInfo {
  /** The HTTP status: 200, or 201 for a create (a replayed one included). */
  status: number
  /** `X-Request-Id`: quote it in a support request; the service's log line of the call has it. */
  requestId: string | undefined
  /** The key's budget; undefined when the service does not limit requests. */
  rateLimit: RateLimitBudget | undefined
  /** `Deprecation` (RFC 9745): when the operation was deprecated; undefined when it is not. */
  deprecation: Date | undefined
  /** `Sunset` (RFC 8594): when the operation goes away (then 410 `gone`); undefined when none. */
  sunset: Date | undefined
  /**
   * `Idempotent-Replayed: true`: this create was answered from an earlier request with the same
   * `Idempotency-Key` (the pet was made then, not now).
   */
  idempotentReplayed: boolean
  /** `Preference-Applied` (RFC 7240): what of `prefer` a staging service applied, as sent. */
  preferenceApplied: string | undefined
  /** Every field of the answer, for anything not parsed above. */
  headers: Headers
}

/** A call's value and what the service said beside it. */
export interface WithResponse<T> {
  data: T
  response: ResponseInfo
}

export function responseInfo(answer: Answer): ResponseInfo {
  const { headers } = answer
  return {
    status: answer.status,
    requestId: headers.get('x-request-id') ?? undefined,
    rateLimit: parseBudget(headers.get('ratelimit'), headers.get('ratelimit-policy')),
    deprecation: parseDeprecation(headers.get('deprecation')),
    sunset: parseHttpDate(headers.get('sunset')),
    idempotentReplayed: headers.get('idempotent-replayed')?.trim() === 'true',
    preferenceApplied: headers.get('preference-applied') ?? undefined,
    headers,
  }
}

/**
 * `RateLimit`'s first readable policy, with the quota and window of the policy of the same name
 * in `RateLimit-Policy`, e.g. `"default";r=599;t=42` and `"default";q=600;w=60`.
 */
export function parseBudget(
  rateLimit: string | null,
  policy: string | null,
): RateLimitBudget | undefined {
  const left = parseRateLimit(rateLimit)
  if (left === undefined || rateLimit === null) return undefined
  const name = policyName(rateLimit)
  const quota = policy === null ? undefined : policyParams(policy, name)
  return {
    policy: name,
    remaining: left.remaining,
    reset: left.reset,
    quota: integerParam(quota, 'q'),
    window: integerParam(quota, 'w'),
  }
}

/** The name of the policy whose `r` and `t` parseRateLimit read: the first item with both. */
function policyName(field: string): string {
  for (const item of splitOutsideQuotes(field, ',')) {
    const params = itemParams(item)
    if (params.has('r') && params.has('t')) return unquote(splitOutsideQuotes(item, ';')[0] ?? '')
  }
  return ''
}

function policyParams(field: string, name: string): Map<string, string> | undefined {
  for (const item of splitOutsideQuotes(field, ',')) {
    if (unquote(splitOutsideQuotes(item, ';')[0] ?? '') === name) return itemParams(item)
  }
  return undefined
}

function itemParams(item: string): Map<string, string> {
  const params = new Map<string, string>()
  for (const param of splitOutsideQuotes(item, ';').slice(1)) {
    const [key = '', raw = ''] = param.split('=', 2)
    params.set(key.trim(), raw.trim())
  }
  return params
}

function integerParam(params: Map<string, string> | undefined, key: string): number | undefined {
  const raw = params?.get(key)
  return raw !== undefined && /^\d+$/.test(raw) ? Number(raw) : undefined
}

/** An sf-string's content (RFC 9651 §3.3.3), or a token as it is. */
function unquote(text: string): string {
  const trimmed = text.trim()
  if (!trimmed.startsWith('"') || !trimmed.endsWith('"') || trimmed.length < 2) return trimmed
  return trimmed.slice(1, -1).replace(/\\(["\\])/g, '$1')
}

/** RFC 9745: an sf-date, `@<unix seconds>`. */
export function parseDeprecation(value: string | null): Date | undefined {
  const seconds = /^\s*@(-?\d{1,15})\s*$/.exec(value ?? '')?.[1]
  return seconds === undefined ? undefined : new Date(Number(seconds) * 1000)
}

/** An HTTP-date (RFC 9110 §5.6.7), as `Sunset` carries it. */
export function parseHttpDate(value: string | null): Date | undefined {
  if (value === null) return undefined
  const time = Date.parse(value)
  return Number.isNaN(time) ? undefined : new Date(time)
}
