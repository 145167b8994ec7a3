// D2: bearer API keys, checked before validation and before any look-up. A 401 carries the
// Error body and an RFC 6750 §3 challenge; `error="invalid_token"` only when a key came. D3:
// failed guesses are limited per client address, and a known key costs no look-up.
import type { FastifyRequest, onRequestHookHandler } from 'fastify'
import { AUTHORIZATION_MAX_LENGTH } from '../../contract/limits.ts'
import { ApiError } from '../../errors.ts'
import type { KeyCheck, KeyVerifier, StoreLookup } from '../../keys/verifier.ts'
import type { AuthFailureObserver } from '../../observability/metrics.ts'
import type { AuthFailureLimit } from '../../rate-limit/auth-failures.ts'
import { clientAddress } from '../../rate-limit/client-address.ts'
import { isLetters, startsWithLetters } from '../ascii-case.ts'

declare module 'fastify' {
  interface FastifyRequest {
    /** The id of the API key that authenticated this request ('' before, and outside /v1). */
    apiKeyId: string
  }
}

const CHALLENGE = 'Bearer realm="petstore"'
export const INVALID_TOKEN = 'Bearer realm="petstore", error="invalid_token"'

/** D3: what the auth step counts failures with, when the limit is on. */
export interface AuthFailureOptions {
  limit: AuthFailureLimit
  /** 429s for refused addresses, for metrics. */
  observer?: AuthFailureObserver
}

/**
 * The operations' first check (plugins/operations.ts). A callback hook rather than an async one:
 * a key memory knows is checked synchronously, and then the request goes on without a promise
 * and a microtask. Only a key memory cannot judge costs a look-up in the store (keys/verifier.ts).
 *
 * D3: what is counted against the client's address (rate-limit/client-address.ts: without the
 * port a balancer may write, so that each connection is not a new client), and refused 429 once
 * it is past its limit, is a token that could have been a key and is not: one unknown to the
 * store or not among the environment's keys. A request without a key, a malformed key or one of
 * the other environment is told so, as always: they cost no look-up, and no guess of that kind
 * can succeed. A key this process has seen valid is checked as usual from an address past its
 * limit.
 */
export function authenticate(
  verifier: KeyVerifier,
  failures?: AuthFailureOptions,
): onRequestHookHandler {
  const refuseUnknown = failures === undefined ? refuseNow : countAndRefuse(failures)
  return function authenticate(request, _reply, done) {
    const answer = answerFromMemory(request, verifier)
    if (answer instanceof ApiError) {
      done(answer)
      return
    }
    if (answer.valid === true) {
      request.apiKeyId = answer.keyId
      done()
      return
    }
    if (answer.valid === false && !answer.unknown) {
      done(invalidKey(answer.reason))
      return
    }
    const seenValid = answer.valid === undefined && answer.seenValid
    const waitSeconds = seenValid ? undefined : failures?.limit.refusedFor(clientAddress(request))
    if (failures !== undefined && waitSeconds !== undefined) {
      failures.observer?.refused()
      done(tooManyFailures(failures.limit, waitSeconds))
      return
    }
    if (answer.valid === false) refuseUnknown(request, invalidKey(answer.reason), done)
    else askStore(request, verifier, answer, failures, refuseUnknown, done)
  }
}

/** What can be told without the store: a refusal of the field, or the verifier's answer. */
function answerFromMemory(
  request: FastifyRequest,
  verifier: KeyVerifier,
): ApiError | KeyCheck | StoreLookup {
  const header = request.headers.authorization
  const refusal = refuseField(request, header)
  if (refusal !== undefined) return refusal
  const token = header === undefined ? undefined : bearerToken(header)
  if (token === undefined) return missingKey(header)
  return token === '' ? EMPTY : verifier.fromMemory(token)
}

/**
 * The store's answer. A guess being looked up counts against its address until it is answered
 * (a question already asked about the same key adds none), so that a client's concurrent guesses
 * do not all pass the limit before the first failure is counted.
 */
function askStore(
  request: FastifyRequest,
  verifier: KeyVerifier,
  lookup: StoreLookup,
  failures: AuthFailureOptions | undefined,
  refuseUnknown: Refuse,
  done: (err?: Error) => void,
): void {
  const answered =
    failures === undefined || lookup.seenValid || lookup.asked
      ? noop
      : failures.limit.lookingUp(clientAddress(request))
  verifier.fromStore(lookup).then(
    (check) => {
      if (!check.valid) {
        refuseUnknown(request, invalidKey(check.reason), done, answered)
        return
      }
      answered()
      request.apiKeyId = check.keyId
      done()
    },
    (err: Error) => {
      answered()
      done(err)
    },
  )
}

function noop(): void {}

/** Sends the 401; `counted` runs once the failure is counted, before it is sent. */
type Refuse = (
  request: FastifyRequest,
  error: ApiError,
  done: (err?: Error) => void,
  counted?: () => void,
) => void

function refuseNow(
  _request: FastifyRequest,
  error: ApiError,
  done: (err?: Error) => void,
  counted: () => void = noop,
): void {
  counted()
  done(error)
}

/** The 401 counts against the client's address before it is sent (failing open, D3). */
function countAndRefuse({ limit }: AuthFailureOptions): Refuse {
  return (request, error, done, counted = noop) => {
    const sent = () => {
      counted()
      done(error)
    }
    limit.failed(clientAddress(request), request.log).then(sent, sent)
  }
}

function missingKey(header: string | undefined): ApiError {
  return new ApiError(
    'unauthorized',
    header === undefined
      ? 'an API key is required: Authorization: Bearer <API key>'
      : 'the Authorization header must use the Bearer scheme: Authorization: Bearer <API key>',
    { 'www-authenticate': CHALLENGE },
  )
}

function invalidKey(reason: string): ApiError {
  return new ApiError('unauthorized', reason, { 'www-authenticate': INVALID_TOKEN })
}

/** 429 with Retry-After and the draft-10 fields of the policy that refused it (D12's form). */
function tooManyFailures(limit: AuthFailureLimit, waitSeconds: number): ApiError {
  return new ApiError(
    'rate_limited',
    `too many failed authentications from this address: ${limit.limit} in ${limit.windowSeconds} s; retry in ${waitSeconds} s`,
    {
      'retry-after': String(waitSeconds),
      'ratelimit-policy': `"auth-failures";q=${limit.limit};w=${limit.windowSeconds}`,
      ratelimit: `"auth-failures";r=0;t=${waitSeconds}`,
    },
  )
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
    if (isLetters(name, AUTHORIZATION)) count++
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
  if (!startsWithLetters(header, SCHEME)) return undefined
  let i = SCHEME.length
  if (i === header.length) return ''
  if (header.charCodeAt(i) !== SPACE) return undefined
  while (header.charCodeAt(i) === SPACE) i++
  // The common case, the token running to the end, in one scan by the regular expression engine
  // rather than a step of JavaScript per character.
  const rest = header.slice(i)
  if (!LATIN1_WHITE_SPACE.test(rest)) return rest
  const start = i
  while (i < header.length && !isWhiteSpace(header.charCodeAt(i))) i++
  const token = header.slice(start, i)
  while (header.charCodeAt(i) === SPACE) i++
  return i === header.length ? token : undefined
}

const SCHEME = 'bearer'
const AUTHORIZATION = 'authorization'
const SPACE = 0x20

/** isWhiteSpace's characters. */
const LATIN1_WHITE_SPACE = /[\t-\r \u00a0]/

/** White space as JavaScript's `\s` has it, for the Latin-1 characters a header can hold. */
function isWhiteSpace(code: number): boolean {
  return code === SPACE || (code >= 0x09 && code <= 0x0d) || code === 0xa0
}

const EMPTY: KeyCheck = { valid: false, reason: 'the API key is empty' }
