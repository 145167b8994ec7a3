// Response definitions for the operations: body schema, description, the headers each response
// carries and an example of each error. Fastify serialises with the body schema; the OpenAPI
// document shows all of it, with each header and error response written once under
// `components` (contract/components.ts).
import type { TSchema } from 'typebox'
import { type ErrorCode, errorBody, errorCatalog } from '../errors.ts'
import { ErrorBodySchema, ref } from './schemas.ts'

export interface HeaderSpec {
  type: 'string' | 'integer'
  description: string
  /** What the header looks like on a response, shown in the reference. */
  example: string | number
  /** The form this service sends, as a regular expression (a reader's check, not the grammar). */
  pattern?: string
  /**
   * Whether every response that declares the header carries it. The document marks those
   * `required` and refers to them under components; an optional one is written out where it is
   * used (contract/components.ts), because openapi-typescript types every `$ref`'d header as
   * present, whatever the component says.
   */
  required: boolean
}

export const headers = {
  requestId: {
    type: 'string',
    description:
      'Identifies this request in the logs. A well-formed `X-Request-Id` sent by the client (1–128 of `A-Z a-z 0-9 . _ : -`) is echoed; otherwise one is generated.',
    example: '0b6f2a8e-3c41-4d7a-9f2e-5a1c8e7d9b20',
    required: true,
  },
  rateLimitPolicy: {
    type: 'string',
    description:
      'The API key\'s quota (draft-ietf-httpapi-ratelimit-headers-10), an RFC 9651 structured-field List of policies. Each item is the policy\'s name, an sf-string, with the sf-integer parameters `q` (requests allowed per window) and `w` (the window, in seconds). This service sends one item, `"default";q=<quota>;w=60`; a 429 for failed authentications names `"auth-failures"` instead. Read it as a structured field (parameters may come in any order, and unknown ones are ignored), not by position. Absent when rate limiting is off.',
    example: '"default";q=600;w=60',
    pattern: '^"[a-z-]+";q=\\d+;w=\\d+$',
    required: false,
  },
  rateLimit: {
    type: 'string',
    description:
      'What is left of the budget (draft-ietf-httpapi-ratelimit-headers-10), an RFC 9651 structured-field List: each item is a policy\'s name, an sf-string matching an item of `RateLimit-Policy`, with the sf-integer parameters `r` (requests remaining in this window) and `t` (seconds until the window resets). This service sends one item, e.g. `"default";r=599;t=42`. Absent when rate limiting is off.',
    example: '"default";r=599;t=42',
    pattern: '^"[a-z-]+";r=\\d+;t=\\d+$',
    required: false,
  },
  link: {
    type: 'string',
    description:
      'RFC 8288 links. On listPets, present only when more animals follow: one link, `<URI>; rel="next"`, whose URI is relative to the request (resolve it against the URL you called) and is the next page\'s request as it is: the same `limit` and `status`, and a `cursor`. Follow it, or pass its `cursor` query parameter with the same `limit` and `status`; never build a cursor. No link: this was the last page. The body stays a bare array.',
    example: '</v1/pets?limit=20&status=available&cursor=eyJhZnRlciI6MjB9>; rel="next"',
    pattern: '^<[^>]+>; rel="next"$',
    required: false,
  },
  location: {
    type: 'string',
    description: 'The new animal: `/v1/pets/{id}`.',
    example: '/v1/pets/42',
    required: true,
  },
  idempotentReplayed: {
    type: 'string',
    description:
      '`true` when this is the stored answer to an earlier request with the same `Idempotency-Key` (no new animal was made); absent otherwise.',
    example: 'true',
    required: false,
  },
  wwwAuthenticate: {
    type: 'string',
    description:
      'RFC 6750 challenge: `Bearer realm="petstore"` when no credentials came, with `error="invalid_token"` when a key came and is not valid.',
    example: 'Bearer realm="petstore"',
    required: true,
  },
  retryAfter: {
    type: 'integer',
    description: 'Seconds until the budget resets (RFC 9110).',
    example: 42,
    required: true,
  },
  retryAfterInUse: {
    type: 'integer',
    description: 'Seconds to wait before retrying with the same key (RFC 9110): 1.',
    example: 1,
    required: true,
  },
  retryAfterUnavailable: {
    type: 'integer',
    description:
      'Seconds to wait before retrying (RFC 9110): 1 when the service is overloaded or its database cannot be reached, 10 when the database cannot write (a full or read-only disk).',
    example: 1,
    required: true,
  },
  allow: {
    type: 'string',
    description: 'The methods the route has.',
    example: 'GET, HEAD, POST',
    required: true,
  },
  deprecation: {
    type: 'string',
    description: 'RFC 9745 structured date of the deprecation, `@<unix seconds>`.',
    example: '@1795305600',
    required: true,
  },
  sunset: {
    type: 'string',
    description: 'RFC 8594: the removal instant, `Thu, 05 Dec 2030 00:00:00 GMT`.',
    example: 'Thu, 05 Dec 2030 00:00:00 GMT',
    required: true,
  },
  deprecationLink: {
    type: 'string',
    description:
      'RFC 8288 links: `rel="deprecation"` and `rel="sunset"` to the documentation, `rel="successor-version"` to `/v1/pets`.',
    example:
      '</docs#/animals/getPet>; rel="deprecation"; type="text/html", </docs#/animals/getPet>; rel="sunset"; type="text/html", </v1/pets>; rel="successor-version"',
    required: true,
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

/** An example of the Error body with this code, from the catalog, named by its code. */
export function errorExample(code: ErrorCode) {
  return { summary: errorCatalog[code].summary, value: errorBody(code, errorCatalog[code].example) }
}

/**
 * An Error response; the description lists the codes this operation can answer with here, and
 * there is an example of each.
 */
export function errorResponse(
  codes: ErrorCode[],
  extraHeaders: Record<string, HeaderSpec> = {},
  baseHeaders: Record<string, HeaderSpec> = common,
) {
  const lines = codes.map((code) => `\`${code}\`: ${errorCatalog[code].summary}`)
  const response = jsonResponse(lines.join(' '), ref(ErrorBodySchema), extraHeaders, baseHeaders)
  const examples = Object.fromEntries(codes.map((code) => [code, errorExample(code)]))
  return {
    ...response,
    content: { 'application/json': { ...response.content['application/json'], examples } },
  }
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
    503: errorResponse(['unavailable'], {
      'Retry-After': headers.retryAfterUnavailable,
      ...extraHeaders,
    }),
  }
}
