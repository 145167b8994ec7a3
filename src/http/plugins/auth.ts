// D2: bearer API keys, checked before validation and before any look-up. A 401 carries the
// Error body and an RFC 6750 §3 challenge; `error="invalid_token"` only when a key came.
import type { FastifyRequest, onRequestHookHandler } from 'fastify'
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

// The scheme is case-insensitive (RFC 9110 §11.1); the token is what follows the spaces.
// HTTP parsers drop trailing white space from a field value, so "Bearer " arrives as "Bearer":
// that is the Bearer scheme with an empty token, not another scheme.
const BEARER = /^bearer(?: +(\S*))? *$/i

/**
 * The operations' first check (plugins/operations.ts). A callback hook rather than an async one:
 * keys from the environment are checked synchronously, and then the request goes on without a
 * promise and a microtask.
 */
export function authenticate(verify: KeyVerifier): onRequestHookHandler {
  return function authenticate(request, _reply, done) {
    const header = request.headers.authorization
    const match = header === undefined ? null : BEARER.exec(header)
    const token = match === null ? undefined : (match[1] ?? '')
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

const EMPTY: KeyCheck = { valid: false, reason: 'the API key is empty' }

function accept(request: FastifyRequest, check: KeyCheck, done: (err?: Error) => void): void {
  if (!check.valid) {
    done(new ApiError('unauthorized', check.reason, { 'www-authenticate': INVALID_TOKEN }))
    return
  }
  request.apiKeyId = check.keyId
  done()
}
