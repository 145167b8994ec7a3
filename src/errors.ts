// The error catalog (D4 in docs/decisions.md): every error the service sends has one of these
// codes, the HTTP status listed beside it, and the body {code, message, status}.
// The OpenAPI document and docs/api.md list exactly these codes; a test keeps them in step. Each
// has an example message, as the service words it, for the document's examples.

export const errorCatalog = {
  invalid_request: {
    status: 400,
    example:
      'query parameter limit must be an integer from 1 to 100, written in plain digits with no leading zero (got "05")',
    summary: 'A parameter, header or body is invalid; the message names the field and the rule.',
  },
  unauthorized: {
    status: 401,
    example: 'an API key is required: Authorization: Bearer <API key>',
    summary: 'The API key is missing or invalid.',
  },
  not_found: {
    status: 404,
    example: 'no pet with id 42',
    summary: 'No such pet, or no such route.',
  },
  method_not_allowed: {
    status: 405,
    example: 'DELETE is not allowed here; use GET, HEAD, POST',
    summary: 'The route exists but not with this method; `Allow` lists the methods it has.',
  },
  request_timeout: {
    status: 408,
    example:
      'the request did not arrive in time: headers are allowed 10000 ms, the whole request 30000 ms',
    summary: 'The request did not arrive whole in time; the connection is closed.',
  },
  idempotency_key_in_use: {
    status: 409,
    example: 'a request with this Idempotency-Key is still being processed; retry in 1 s',
    summary:
      'A request with this `Idempotency-Key` is still being processed; retry after `Retry-After`.',
  },
  gone: {
    status: 410,
    example: 'GET /v1/pets/:petId was removed on Thu, 05 Dec 2030 00:00:00 GMT; use /v1/pets',
    summary: 'The operation was removed at its sunset date.',
  },
  payload_too_large: {
    status: 413,
    example: 'request body is larger than 16384 bytes',
    summary: 'The request body is larger than the limit.',
  },
  uri_too_long: {
    status: 414,
    example: 'the request target is longer than 8192 characters',
    summary: 'The request target (path and query) is too long.',
  },
  unsupported_media_type: {
    status: 415,
    example: 'Content-Type must be application/json',
    summary: 'The request body is not `application/json`, or its `charset` is not UTF-8.',
  },
  idempotency_key_reused: {
    status: 422,
    example:
      'this Idempotency-Key was already used by this API key with another request body; use a new key for a new request',
    summary: 'This `Idempotency-Key` was used by this API key with another request body.',
  },
  rate_limited: {
    status: 429,
    example: 'this API key has used its 600 requests for this minute; retry in 42 s',
    summary:
      'The key has used its request budget for this window, or the client address its failed authentications; see `Retry-After`.',
  },
  header_fields_too_large: {
    status: 431,
    example: 'the request line and headers are larger than 16 KiB',
    summary: 'The request headers are larger than the limit; the connection is closed.',
  },
  internal_error: {
    status: 500,
    example: 'an unexpected error occurred; quote the X-Request-Id when reporting it',
    summary: 'An unexpected fault; the details are only in the logs.',
  },
  unavailable: {
    status: 503,
    example: 'the service is overloaded; retry after 1 s',
    summary:
      'The service is overloaded, shutting down or its database is unreachable; retry later (`Retry-After`).',
  },
  http_version_not_supported: {
    status: 505,
    example: 'only HTTP/1.0 and HTTP/1.1 are served',
    summary: 'The request is not HTTP/1.0 or HTTP/1.1; the connection is closed.',
  },
} as const

export type ErrorCode = keyof typeof errorCatalog

export const errorCodes = Object.keys(errorCatalog) as ErrorCode[]

export interface ErrorBody {
  code: ErrorCode
  message: string
  status: number
}

/** An error that reaches the client as it is: code, message, and any headers it needs. */
export class ApiError extends Error {
  readonly code: ErrorCode
  readonly statusCode: number
  readonly headers: Readonly<Record<string, string>>

  constructor(code: ErrorCode, message: string, headers: Record<string, string> = {}) {
    super(message)
    this.name = 'ApiError'
    this.code = code
    this.statusCode = errorCatalog[code].status
    this.headers = headers
  }

  toBody(): ErrorBody {
    return errorBody(this.code, this.message)
  }
}

export function errorBody(code: ErrorCode, message: string): ErrorBody {
  return { code, message, status: errorCatalog[code].status }
}

/** The code for a status the framework produced on its own (e.g. a 413 from the body parser). */
export function codeForStatus(status: number): ErrorCode {
  const found = errorCodes.find((code) => errorCatalog[code].status === status)
  if (found) return found
  return status >= 500 ? 'internal_error' : 'invalid_request'
}
