// Limits the interface leaves open ("not shown"), chosen here and published in the OpenAPI
// document and docs/api.md. Each is used by the schemas and by the server; nothing repeats them.

/** listPets page size, as the interface fixes it. */
export const LIST_LIMIT = { minimum: 1, maximum: 100, default: 20 } as const

/** Longest accepted `name`, in Unicode code points (D6). */
export const NAME_MAX_LENGTH = 200

/**
 * Largest id and categoryId. Both are int64 on the wire, but JavaScript numbers (and so most
 * JSON parsers) are exact only up to 2^53 − 1; values above it are refused with a 400 that
 * states this range rather than silently rounded (D6).
 */
export const MAX_ID = Number.MAX_SAFE_INTEGER

/** Largest request body in bytes (D6). A NewPet at the longest name fits several times over. */
export const BODY_LIMIT_BYTES = 16 * 1024

/** getPet: deprecated since the service's v1.0.0 release, removed at the sunset the interface sets (D7). */
export const GET_PET_DEPRECATED_AT = new Date('2026-11-22T00:00:00Z')
export const GET_PET_SUNSET_AT = new Date('2030-12-05T00:00:00Z')

/** Idempotency-Key (D14): 1–255 visible ASCII characters, as the draft allows. */
export const IDEMPOTENCY_KEY_MAX_LENGTH = 255

/**
 * An Idempotency-Key's characters (D14): visible ASCII, 0x21–0x7E; its length is checked apart,
 * against IDEMPOTENCY_KEY_MAX_LENGTH. routes/idempotency.ts tests keys with it, and its source is
 * the `pattern` the OpenAPI document shows. A literal, as test/redos.test.ts asks.
 */
export const IDEMPOTENCY_KEY_CHARACTERS = /^[\x21-\x7E]+$/

/** Idempotency records expire this long after the first request, unless PETSTORE_IDEMPOTENCY_TTL says (D14). */
export const IDEMPOTENCY_TTL_DEFAULT_SECONDS = 24 * 60 * 60
export const IDEMPOTENCY_TTL_MAX_SECONDS = 7 * 24 * 60 * 60

/**
 * Longest accepted `Authorization` field (D2): far longer than any key (the petstore form's
 * prefix, secret and checksum; API_KEY_MAX_LENGTH for the environment's), so a longer field is
 * refused before it is parsed.
 */
export const AUTHORIZATION_MAX_LENGTH = 512

/** Longest key PETSTORE_API_KEYS may hold: what fits `Bearer <key>` within that field. */
export const API_KEY_MAX_LENGTH = AUTHORIZATION_MAX_LENGTH - 'Bearer '.length

/**
 * Longest `Prefer: delay=<ms>` honoured, in staging only (contract/prefer.ts): long enough to
 * trip a client's timeout, short enough that a mistyped delay does not hold a connection long.
 */
export const PREFER_DELAY_MAX_MS = 10_000
