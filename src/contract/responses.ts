// Response definitions for the operations: body schema, description and the headers each
// response carries. Fastify serialises with the body schema; the OpenAPI document shows all of it.
import type { TSchema } from 'typebox'
import { type ErrorCode, errorCatalog } from '../errors.ts'
import { ErrorBodySchema, ref } from './schemas.ts'

interface HeaderSpec {
  type: 'string' | 'integer'
  description: string
}

export const headers = {
  requestId: {
    type: 'string',
    description:
      'Identifies this request in the logs. A well-formed `X-Request-Id` sent by the client (1–128 of `A-Z a-z 0-9 . _ : -`) is echoed; otherwise one is generated.',
  },
  rateLimitPolicy: {
    type: 'string',
    description:
      'The request budget of the API key (IETF draft-ietf-httpapi-ratelimit-headers-10), e.g. `"default";q=600;w=60`: quota `q` requests per window of `w` seconds. Absent when rate limiting is off.',
  },
  rateLimit: {
    type: 'string',
    description:
      'What is left of the budget (draft-10), e.g. `"default";r=599;t=42`: `r` requests remaining, `t` seconds until the window resets. Absent when rate limiting is off.',
  },
  link: {
    type: 'string',
    description:
      'RFC 8288 links. On listPets, `rel="next"` is present when more animals follow and carries the cursor (keeping `limit` and `status`).',
  },
  location: { type: 'string', description: 'The new animal: `/v1/pets/{id}`.' },
  idempotentReplayed: {
    type: 'string',
    description:
      '`true` when this is the stored answer to an earlier request with the same `Idempotency-Key` (no new animal was made); absent otherwise.',
  },
  wwwAuthenticate: {
    type: 'string',
    description:
      'RFC 6750 challenge: `Bearer realm="petstore"` when no credentials came, with `error="invalid_token"` when a key came and is not valid.',
  },
  retryAfter: { type: 'integer', description: 'Seconds until the budget resets (RFC 9110).' },
  retryAfterInUse: {
    type: 'integer',
    description: 'Seconds to wait before retrying with the same key (RFC 9110): 1.',
  },
  allow: { type: 'string', description: 'The methods the route has.' },
  deprecation: {
    type: 'string',
    description: 'RFC 9745 structured date of the deprecation, `@<unix seconds>`.',
  },
  sunset: {
    type: 'string',
    description: 'RFC 8594: the removal instant, `Thu, 05 Dec 2030 00:00:00 GMT`.',
  },
  deprecationLink: {
    type: 'string',
    description:
      'RFC 8288 links: `rel="deprecation"` and `rel="sunset"` to the documentation, `rel="successor-version"` to `/v1/pets`.',
  },
} satisfies Record<string, HeaderSpec>

/** Headers every response of an operation carries. */
const always = { 'X-Request-Id': headers.requestId }

/**
 * Headers every response that got past authentication carries. A 401 has no budget fields: the
 * key is checked before the rate limit (D2), so no budget is known yet.
 */
const common = {
  ...always,
  'RateLimit-Policy': headers.rateLimitPolicy,
  RateLimit: headers.rateLimit,
}

export function jsonResponse(
  description: string,
  schema: TSchema,
  extraHeaders: Record<string, HeaderSpec> = {},
  baseHeaders: Record<string, HeaderSpec> = common,
) {
  return {
    description,
    headers: { ...baseHeaders, ...extraHeaders },
    content: { 'application/json': { schema } },
  }
}

/** An Error response; the description lists the codes this operation can answer with here. */
export function errorResponse(
  codes: ErrorCode[],
  extraHeaders: Record<string, HeaderSpec> = {},
  baseHeaders: Record<string, HeaderSpec> = common,
) {
  const lines = codes.map((code) => `\`${code}\`: ${errorCatalog[code].summary}`)
  return jsonResponse(lines.join(' '), ref(ErrorBodySchema), extraHeaders, baseHeaders)
}

/** The error responses every authenticated operation shares. */
export function commonErrorResponses(extraHeaders: Record<string, HeaderSpec> = {}) {
  return {
    401: errorResponse(
      ['unauthorized'],
      { 'WWW-Authenticate': headers.wwwAuthenticate, ...extraHeaders },
      always,
    ),
    429: errorResponse(['rate_limited'], { 'Retry-After': headers.retryAfter, ...extraHeaders }),
    500: errorResponse(['internal_error'], extraHeaders),
    503: errorResponse(['unavailable'], extraHeaders),
  }
}
