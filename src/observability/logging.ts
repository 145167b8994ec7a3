// JSON logs (pino, through Fastify). Credentials never reach them (D8, D16): the Authorization
// header is censored, and so is anything in the request's URL that may be one. A client may put
// a credential in any query parameter (`?access_token=…`, `?api-key=…`, `?x-api-key=…`, a name
// nobody thought of), so the query is redacted by allow-list, not deny-list; and a key of ours
// may sit anywhere in the path or query, percent-encoded or not.
import type { FastifyRequest } from 'fastify'
import { type DestinationStream, pino } from 'pino'
import type { Config } from '../config.ts'
import { ListPetsQuery } from '../contract/schemas.ts'
import { clientAddress } from '../rate-limit/client-address.ts'

const REDACTED = '[redacted]'

/**
 * The only query parameters the API reads: listPets' (limit, status, cursor), taken from the
 * contract so that the two cannot drift. Any other parameter is refused with a 400 (the schema
 * has additionalProperties: false), so its value is nothing the service uses, and may be a
 * credential a client put there.
 */
const KNOWN_PARAMETERS: ReadonlySet<string> = new Set(Object.keys(ListPetsQuery.properties))

/**
 * What every valid value of a known parameter is made of: RFC 3986 §2.3's unreserved characters
 * (a limit is digits, a status a word, a cursor base64url; routes/cursor.ts). Anything else, a
 * percent-escape or a `;` or `=` that may start a second pair, is not shown.
 */
const SHOWN_VALUE = /^[0-9A-Za-z._~-]*$/

/**
 * A key of ours (contract/api-key.ts: prefix, then base62), or at least 8 characters of one, so a
 * truncated copy is caught too.
 */
const OUR_KEY = /petstore_(?:live|staging)_[0-9A-Za-z]{8}/

/** One percent-escape (RFC 3986 §2.1). */
const ESCAPE = /%([0-9A-Fa-f]{2})/g

/** How many times a text is decoded: a key encoded twice (`%255F`) is still a key in the log. */
const DECODE_PASSES = 3

/**
 * Percent-decoding that never throws: only escapes of ASCII characters (all a key is made of)
 * are decoded; a malformed `%` or a byte of a multi-byte character stays as it is, where
 * decodeURIComponent would throw on the whole text.
 */
function decodeAscii(text: string): string {
  return text.replace(ESCAPE, (sequence, hex: string) => {
    const code = Number.parseInt(hex, 16)
    return code < 0x80 ? String.fromCharCode(code) : sequence
  })
}

/** Whether the text holds a key of ours, as sent or percent-decoded (up to DECODE_PASSES times). */
function holdsKey(text: string): boolean {
  let decoded = text
  for (let pass = 0; ; pass++) {
    if (OUR_KEY.test(decoded)) return true
    if (pass === DECODE_PASSES || !decoded.includes('%')) return false
    const next = decodeAscii(decoded)
    if (next === decoded) return false
    decoded = next
  }
}

/**
 * What may carry a credential in a path segment: a key of ours, or a parameter written into it
 * (`;access_token=…`, a fragment `#token=…`, an encoded `%3Fapi_key=…`). No route of the API has
 * any of these characters, so most paths are returned untouched after one test.
 */
const SUSPECT_PATH = /[%=;#&]|petstore_/
const PARAMETER_CHARACTERS = /[=?;#&]/

function suspectSegment(segment: string): boolean {
  return holdsKey(segment) || PARAMETER_CHARACTERS.test(decodeAscii(segment))
}

/**
 * The path as sent, but for any segment holding a key of ours or a parameter, replaced whole:
 * the log shows what the client asked, not how a credential was disguised.
 */
function redactPath(path: string): string {
  if (!SUSPECT_PATH.test(path)) return path
  return path
    .split('/')
    .map((segment) => (suspectSegment(segment) ? REDACTED : segment))
    .join('/')
}

/**
 * A name of a parameter that is kept in the log beside its redacted value (`api-key=[redacted]`
 * says where a client put a credential). Anything else, a padded base64 token (`?dG9rZW4=`) say,
 * may be the credential itself and is redacted whole.
 */
const PARAMETER_NAME = /^[A-Za-z][\w.-]{0,63}$/
/** An empty value, or base64's padding: the `=` ends a token rather than starts a value. */
const PADDING = /^=+$/

/**
 * One `name=value` pair of the query. The name is kept, so the log says where a client put a
 * credential, unless it holds a key itself. A known parameter keeps a value that could be valid
 * and holds no key (a shown value has no `%`, so it is looked at as sent); every other value is
 * redacted. A bare name (no `=`) outside the allow-list is redacted whole: it may be a token sent
 * on its own (`?s3cr3t`); so is a name that does not look like one (PARAMETER_NAME). Names are
 * compared as sent: `%6Cimit` is not `limit` here.
 */
function redactPair(pair: string): string {
  if (pair === '') return pair
  const equals = pair.indexOf('=')
  const name = equals === -1 ? pair : pair.slice(0, equals)
  if (holdsKey(name)) return REDACTED
  if (!KNOWN_PARAMETERS.has(name)) {
    // `name=` with nothing after but padding is a token of its own too (`?dG9rZW4=`).
    const named = equals !== -1 && PARAMETER_NAME.test(name) && !PADDING.test(pair.slice(equals))
    return named ? `${name}=${REDACTED}` : REDACTED
  }
  if (equals === -1) return pair
  const value = pair.slice(equals + 1)
  return SHOWN_VALUE.test(value) && !OUR_KEY.test(value) ? pair : `${name}=${REDACTED}`
}

/** A query (without its `?`) as it may be logged: see redactPair. */
export function redactQuery(query: string): string {
  return query.split('&').map(redactPair).join('&')
}

/** The URL (a request target, or a full URL) as it may be logged or put in a span (D16, D23). */
export function redactUrl(url: string): string {
  const question = url.indexOf('?')
  if (question === -1) return redactPath(url)
  return `${redactPath(url.slice(0, question))}?${redactQuery(url.slice(question + 1))}`
}

/**
 * Fastify's request serializer (the same fields), with the URL redacted. pino applies it to any
 * `req` field logged, so it takes what it finds.
 */
function serializeRequest(request: Partial<FastifyRequest>) {
  return {
    method: request.method,
    url: typeof request.url === 'string' ? redactUrl(request.url) : undefined,
    host: request.host,
    remoteAddress: clientAddress(request),
    remotePort: request.socket?.remotePort,
  }
}

export function loggerOptions(config: Pick<Config, 'logLevel'>) {
  return {
    level: config.logLevel,
    redact: {
      paths: ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization'],
      censor: REDACTED,
    },
    serializers: { req: serializeRequest },
  }
}

/**
 * Where the service's log lines go: stdout, each line written as it is logged (D8, D11).
 *
 * Not pino's default, which writes in the background and, when the process exits, writes what is
 * still queued with sonic-boom's flushSync. That retries a failed write every 100 ms until it
 * succeeds, whatever the error: on a pipe whose reader is gone (`petstore serve 2>&1 | head -2`,
 * once head has its lines), EPIPE for ever, so a SIGTERM's drain ended in a process that never
 * exited. Written as they are logged, no line is left for the exit, and the first write that
 * meets the closed pipe turns the destination off (pino drops every later line): what cannot be
 * written is not said, and the drain ends as it would have. The cluster primary already wrote so.
 * A line costs one write(2) on the event loop (about 1 µs more than the batched background
 * writes, with pino alone); a reader that stops reading but keeps the pipe open now holds the
 * loop up rather than filling memory.
 */
export function logDestination(): DestinationStream {
  return pino.destination({ dest: 1, sync: true })
}
