// Reading the response fields the retries and errors depend on.
import type { RateLimit } from './errors.ts'

/**
 * `Retry-After` (RFC 9110 §10.2.3) in seconds: delay-seconds, or an HTTP-date counted from
 * `now`. Undefined when absent or unreadable.
 */
export function parseRetryAfter(value: string | null, now: number): number | undefined {
  if (value === null) return undefined
  const text = value.trim()
  if (/^\d+$/.test(text)) return Number(text)
  const date = Date.parse(text)
  if (Number.isNaN(date)) return undefined
  return Math.max(0, Math.ceil((date - now) / 1000))
}

/**
 * The first policy of a draft-ietf-httpapi-ratelimit-headers-10 `RateLimit` field,
 * e.g. `"default";r=50;t=30`: a structured-field list (RFC 8941) whose items carry the
 * parameters `r` (remaining) and `t` (seconds to reset). Undefined when absent or unreadable.
 */
export function parseRateLimit(value: string | null): RateLimit | undefined {
  if (value === null) return undefined
  for (const item of splitOutsideQuotes(value, ',')) {
    const params = new Map<string, string>()
    // The first part is the policy's name; the parameters follow it.
    for (const param of splitOutsideQuotes(item, ';').slice(1)) {
      const [key = '', raw = ''] = param.split('=', 2)
      params.set(key.trim(), raw.trim())
    }
    const remaining = params.get('r')
    const reset = params.get('t')
    if (isDigits(remaining) && isDigits(reset)) {
      return { remaining: Number(remaining), reset: Number(reset) }
    }
  }
  return undefined
}

function isDigits(text: string | undefined): text is string {
  return text !== undefined && /^\d+$/.test(text)
}

/** Splits at `separator` where it is not inside a quoted string (with `\` escapes). */
export function splitOutsideQuotes(text: string, separator: string): string[] {
  const parts: string[] = []
  let current = ''
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const char = text.charAt(i)
    if (quoted && char === '\\') {
      current += char + text.charAt(i + 1)
      i++
      continue
    }
    if (char === '"') quoted = !quoted
    if (char === separator && !quoted) {
      parts.push(current)
      current = ''
    } else current += char
  }
  parts.push(current)
  return parts
}
