// D14: what createPet needs to honour an Idempotency-Key (draft-ietf-httpapi-idempotency-key-header):
// the key as sent, and a fingerprint of the request it was sent with.
import { createHash } from 'node:crypto'
import { IDEMPOTENCY_KEY_MAX_LENGTH } from '../contract/limits.ts'
import { ApiError } from '../errors.ts'

/** 1–255 visible ASCII characters (0x21–0x7E). */
const KEY = new RegExp(`^[\\x21-\\x7E]{1,${IDEMPOTENCY_KEY_MAX_LENGTH}}$`)
/** The draft's structured-field form (RFC 9651 §3.3.3): a quoted string, `\"` and `\\` escaped. */
const QUOTED = /^"((?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\["\\])*)"$/

const RULE =
  'the Idempotency-Key header must be 1 to 255 visible ASCII characters (0x21–0x7E), optionally as a quoted string'

function parseOne(value: string): string {
  const quoted = QUOTED.exec(value)
  const key = quoted === null ? value : (quoted[1] ?? '').replace(/\\(["\\])/g, '$1')
  if (!KEY.test(key)) throw new ApiError('invalid_request', RULE)
  return key
}

/**
 * The key of a request, from every Idempotency-Key field line it carried; undefined without one.
 * `"abc"` and `abc` are the same key; lines that disagree are a 400.
 */
export function readIdempotencyKey(lines: readonly string[] | undefined): string | undefined {
  if (lines === undefined || lines.length === 0) return undefined
  const keys = new Set(lines.map(parseOne))
  if (keys.size > 1) {
    throw new ApiError(
      'invalid_request',
      'the Idempotency-Key header was given more than once with different values',
    )
  }
  return keys.values().next().value
}

/** JSON with object keys sorted at every depth: equal requests, however written, are equal text. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`
  }
  return JSON.stringify(value)
}

/**
 * The request's fingerprint: SHA-256 of the validated body in canonical form, so that
 * `{"a":1,"b":2}` and `{ "b": 2, "a": 1 }` are the same request.
 */
export function requestFingerprint(body: unknown): string {
  return createHash('sha256').update(canonicalJson(body)).digest('hex')
}
