// D2: bearer API keys, checked before validation and before any look-up. A 401 carries the
// Error body and an RFC 6750 §3 challenge; `error="invalid_token"` only when a key came.
import type { FastifyRequest, onRequestHookHandler } from 'fastify'
import { AUTHORIZATION_MAX_LENGTH } from '../../contract/limits.ts'
import { ApiError } from '../../errors.ts'
import type { KeyCheck, KeyVerifier } from '../../keys/verifier.ts'

declare module 'fastify' {
  interface FastifyRequest {
    /** The id of the API key that authenticated this request ('' before, and outside /v1). */
    apiKeyId: string
  }
}

const CHALLENGE = 'Bearer realm="petstore"'
const INVALID_TOKEN = 'Bearer realm="petstore", error="invalid_token"'

/**
 * The operations' first check (plugins/operations.ts). A callback hook rather than an async one:
 * keys from the environment are checked synchronously, and then the request goes on without a
 * promise and a microtask.
 */
export function authenticate(verify: KeyVerifier): onRequestHookHandler {
  return function authenticate(request, _reply, done) {
    const header = request.headers.authorization
    const refusal = refuseField(request, header)
    if (refusal !== undefined) {
      done(refusal)
      return
    }
    const token = header === undefined ? undefined : bearerToken(header)
    if (token === undefined) {
      done(
        new ApiError(
          'unauthorized',
          header === undefined
            ? 'an API key is required: Authorization: Bearer <API key>'
            : 'the Authorization header must use the Bearer scheme: Authorization: Bearer <API key>',
          { 'www-authenticate': CHALLENGE },
        ),
      )
      return
    }
    const check = token === '' ? EMPTY : verify(token)
    if (check instanceof Promise) check.then((result) => accept(request, result, done), done)
    else accept(request, check, done)
  }
}

/**
 * Before any parsing: one field line only, since Node keeps the first of several and a proxy
 * reading the last would see another identity; and a bounded length, since no key comes near it.
 */
function refuseField(request: FastifyRequest, header: string | undefined): ApiError | undefined {
  if (header === undefined) return undefined
  if (header.length > AUTHORIZATION_MAX_LENGTH) {
    return new ApiError(
      'unauthorized',
      `the Authorization header is longer than ${AUTHORIZATION_MAX_LENGTH} characters; no API key is that long`,
      { 'www-authenticate': INVALID_TOKEN },
    )
  }
  if (authorizationLines(request.raw.rawHeaders) > 1) {
    return new ApiError(
      'invalid_request',
      'the Authorization header was sent more than once; send one Authorization: Bearer <API key>',
    )
  }
  return undefined
}

/** How many Authorization field lines came (rawHeaders alternates names and values). */
function authorizationLines(rawHeaders: readonly string[]): number {
  let count = 0
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string
    if (name.length === 13 && name.toLowerCase() === 'authorization') count++
  }
  return count
}

/**
 * The token of a `Bearer` credential (RFC 6750 §2.1), '' for the scheme alone, undefined for
 * anything else. One pass, no regular expression: a pattern in which two runs of spaces could
 * take the same spaces cost time in the square of their number (test/redos.test.ts). The scheme
 * is case-insensitive (RFC 9110 §11.1); HTTP parsers drop trailing white space from a field
 * value, so "Bearer " arrives as "Bearer", the scheme with an empty token.
 */
export function bearerToken(header: string): string | undefined {
  if (header.length < SCHEME.length || header.slice(0, SCHEME.length).toLowerCase() !== SCHEME) {
    return undefined
  }
  let i = SCHEME.length
  if (i === header.length) return ''
  if (header.charCodeAt(i) !== SPACE) return undefined
  while (header.charCodeAt(i) === SPACE) i++
  const start = i
  while (i < header.length && !isWhiteSpace(header.charCodeAt(i))) i++
  const token = header.slice(start, i)
  while (header.charCodeAt(i) === SPACE) i++
  return i === header.length ? token : undefined
}

const SCHEME = 'bearer'
const SPACE = 0x20

/** White space as JavaScript's `\s` has it, for the Latin-1 characters a header can hold. */
function isWhiteSpace(code: number): boolean {
  return code === SPACE || (code >= 0x09 && code <= 0x0d) || code === 0xa0
}

const EMPTY: KeyCheck = { valid: false, reason: 'the API key is empty' }

function accept(request: FastifyRequest, check: KeyCheck, done: (err?: Error) => void): void {
  if (!check.valid) {
    done(new ApiError('unauthorized', check.reason, { 'www-authenticate': INVALID_TOKEN }))
    return
  }
  request.apiKeyId = check.keyId
  done()
}
