// D14: what createPet needs to honour an Idempotency-Key (draft-ietf-httpapi-idempotency-key-header):
// the key as sent, and a fingerprint of the request it was sent with.
import { hash } from 'node:crypto'
import { IDEMPOTENCY_KEY_CHARACTERS, IDEMPOTENCY_KEY_MAX_LENGTH } from '../../contract/limits.ts'
import type { NewPet } from '../../contract/schemas.ts'
import { ApiError } from '../../errors.ts'
import type { IdempotencyClaim } from '../../store/store.ts'
import { petJsonAroundId } from './pets-json.ts'

/** The draft's structured-field form (RFC 9651 §3.3.3): a quoted string, `\"` and `\\` escaped. */
const QUOTED = /^"((?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\["\\])*)"$/

const RULE = `the Idempotency-Key header must be 1 to ${IDEMPOTENCY_KEY_MAX_LENGTH} visible ASCII characters (0x21–0x7E), optionally as a quoted string`

function parseOne(value: string): string {
  const quoted = QUOTED.exec(value)
  const key = quoted === null ? value : (quoted[1] ?? '').replace(/\\(["\\])/g, '$1')
  if (key.length > IDEMPOTENCY_KEY_MAX_LENGTH || !IDEMPOTENCY_KEY_CHARACTERS.test(key))
    throw new ApiError('invalid_request', RULE)
  return key
}

/**
 * The key of a request, from every Idempotency-Key field line it carried; undefined without one.
 * `"abc"` and `abc` are the same key; lines that disagree are a 400. `joined` is the field as
 * Node's `headers` gives it, the lines joined with ", "; `distinct()` the lines themselves
 * (`headersDistinct`, which Node builds for every field on first use, so it is asked for only
 * when the field holds a comma: without one it is a single line).
 */
export function readIdempotencyKey(
  joined: string | undefined,
  distinct: () => readonly string[] | undefined,
): string | undefined {
  if (joined === undefined) return undefined
  if (!joined.includes(',')) return parseOne(joined)
  const lines = distinct()
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

/**
 * The request's fingerprint: SHA-256 of the validated body in canonical form (JSON, keys sorted,
 * no white space), so that `{"name":"Rex","categoryId":1}` and `{ "categoryId": 1, "name": "Rex" }`
 * are the same request. A NewPet has exactly these keys (the schema allows no other), so its
 * canonical form is one JSON.stringify of them in sorted order: the same text a sort of any
 * object's keys at every depth gives, which the records already stored were made with
 * (test/idempotency-fingerprint.test.ts), at a third of its cost. crypto.hash, one call, rather
 * than a Hash object: it is what every keyed create pays.
 */
export function requestFingerprint(pet: NewPet): string {
  const { categoryId, name, status } = pet
  const canonical = JSON.stringify(
    status === undefined ? { categoryId, name } : { categoryId, name, status },
  )
  return hash('sha256', canonical, 'hex')
}

/**
 * What a keyed create asks the store for (D14): the record of `key` for `apiKeyId`, with the
 * request's fingerprint and the 201 to replay, unless a live record holds the key. `nowMs` is
 * the request's time, `ttlMs` how long a record lives. Also what the benchmark's references ask
 * of the same statements.
 */
export function createClaim(
  pet: NewPet,
  { apiKeyId, key, nowMs, ttlMs }: { apiKeyId: string; key: string; nowMs: number; ttlMs: number },
): IdempotencyClaim {
  return {
    apiKeyId,
    key,
    fingerprint: requestFingerprint(pet),
    now: new Date(nowMs),
    expiredAt: new Date(nowMs - ttlMs),
    outcome: {
      status: 201,
      body: petJsonAroundId(pet),
      location: { before: '/v1/pets/', after: '' },
    },
  }
}
