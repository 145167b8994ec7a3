// JSON request bodies (D6, D16): read exactly as sent, or refused naming what is wrong. Replaces
// Fastify's parser, which changes bytes silently in four ways: it decodes invalid UTF-8 to U+FFFD,
// ignores the `charset` parameter, keeps the last of duplicate object keys (JSON.parse does), and
// lets JSON.parse round numbers (1.0000000000000001 becomes 1, 1e3 becomes 1000).
import { isUtf8 } from 'node:buffer'
import fp from 'fastify-plugin'
import { ApiError } from '../../errors.ts'

// ---- Bytes: UTF-8 only (RFC 8259 §8.1) ----

/**
 * The labels the WHATWG Encoding Standard maps to UTF-8 (what browsers and `TextDecoder`
 * accept), compared lower-cased. Any other `charset` names bytes this service would misread.
 */
const UTF8_LABELS = new Set([
  'utf-8',
  'utf8',
  'unicode-1-1-utf-8',
  'unicode11utf8',
  'unicode20utf8',
  'x-unicode20utf8',
])

/**
 * `; name = value` parameters of a Content-Type (RFC 9110 §5.6.6, §8.3.1); the value a token or
 * a quoted-string, whose `;` does not end it. White space around `=` is not allowed by the
 * grammar but is tolerated here, so that `charset = latin1` is refused rather than overlooked.
 */
const PARAMETER = /;\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)/g

/** The usual spellings of `application/json` in UTF-8, accepted without reading parameters. */
const PLAIN_UTF8 = /^application\/json; ?charset=(?:"utf-8"|utf-8)$/i

/** Throws a 415 when the Content-Type names a charset other than UTF-8. */
export function checkCharset(contentType: string | undefined): void {
  // Most requests carry `application/json` with no parameter or `charset=utf-8` alone.
  if (contentType === undefined || !contentType.includes(';') || PLAIN_UTF8.test(contentType))
    return
  for (const [, name = '', rawValue = ''] of contentType.matchAll(PARAMETER)) {
    if (name.toLowerCase() !== 'charset') continue
    let value = rawValue.trim()
    if (value.startsWith('"')) value = value.slice(1, -1).replace(/\\(.)/g, '$1')
    if (!UTF8_LABELS.has(value.toLowerCase())) {
      throw new ApiError(
        'unsupported_media_type',
        `Content-Type charset ${JSON.stringify(value)} is not supported; JSON bodies must be UTF-8 (RFC 8259 §8.1): send charset=utf-8 or no charset`,
      )
    }
  }
}

/**
 * Where the first ill-formed UTF-8 sequence starts (Unicode §3.9, Table 3-7: no overlong forms,
 * no surrogates, nothing above U+10FFFF), or -1. Only runs once `isUtf8` has said no, to name the
 * offset in the message.
 */
function invalidUtf8At(bytes: Uint8Array): number {
  let i = 0
  while (i < bytes.length) {
    const lead = bytes[i] ?? 0
    if (lead < 0x80) {
      i += 1
      continue
    }
    // [continuation bytes, lowest and highest allowed second byte]
    let trail: [number, number, number]
    if (lead >= 0xc2 && lead <= 0xdf) trail = [1, 0x80, 0xbf]
    else if (lead === 0xe0) trail = [2, 0xa0, 0xbf]
    else if (lead === 0xed) trail = [2, 0x80, 0x9f]
    else if (lead >= 0xe1 && lead <= 0xef) trail = [2, 0x80, 0xbf]
    else if (lead === 0xf0) trail = [3, 0x90, 0xbf]
    else if (lead >= 0xf1 && lead <= 0xf3) trail = [3, 0x80, 0xbf]
    else if (lead === 0xf4) trail = [3, 0x80, 0x8f]
    else return i
    const [count, low, high] = trail
    const second = bytes[i + 1] ?? -1
    if (second < low || second > high) return i
    for (let k = 2; k <= count; k++) {
      const next = bytes[i + k] ?? -1
      if (next < 0x80 || next > 0xbf) return i
    }
    i += count + 1
  }
  return -1
}

/**
 * The body as text, refusing invalid UTF-8 where a decoder would put U+FFFD. `isUtf8` (simdutf)
 * and then `toString`, rather than a fatal `TextDecoder`: the same for ASCII bodies, and under
 * half the time for non-ASCII ones (docs/benchmarks.md, "Measurements behind choices in the
 * code").
 */
function decodeUtf8(bytes: Buffer): string {
  if (isUtf8(bytes)) return bytes.toString('utf8')
  const at = invalidUtf8At(bytes)
  throw new ApiError(
    'invalid_request',
    at < 0
      ? 'body is not valid UTF-8 (RFC 8259 §8.1)'
      : `body is not valid UTF-8 (RFC 8259 §8.1): the sequence at byte ${at} (0x${(bytes[at] ?? 0).toString(16).padStart(2, '0')}) is not well-formed`,
  )
}

// ---- Numbers: never rounded ----

/**
 * With the source text the reviver sees (Node ≥ 21), a number written with a fraction or an
 * exponent that lands on an integer is refused instead of being silently taken as one. Integers
 * too large for a double are refused by the schemas' `maximum`, since rounding never brings them
 * back under it.
 */
function refuseInexactIntegers(
  key: string,
  value: unknown,
  context?: { source?: string },
): unknown {
  if (typeof value === 'number' && Number.isInteger(value) && /[.eE]/.test(context?.source ?? '')) {
    throw new ApiError(
      'invalid_request',
      `${key === '' ? 'body' : key} must be written as an integer (digits only), got ${context?.source}`,
    )
  }
  return value
}

/**
 * A number written with a fraction or an exponent has a digit right before its `.`, `e` or `E`.
 * Bodies without one (most) are parsed without the reviver, which made JSON.parse five times
 * slower (docs/benchmarks.md, "Measurements behind choices in the code"); with one, the reviver
 * looks at each number's source.
 */
const MAY_HAVE_INEXACT_NUMBER = /\d[.eE]/

// ---- Keys: each once (RFC 8259 §4) ----
//
// JSON.parse keeps the last of duplicate keys, so another reader that keeps the first (a proxy,
// a WAF) would see another request. JSON.parse cannot report them, so the text is looked at
// again once it has parsed, in two steps: a cheap count that clears almost every body, and an
// exact scan for the rest.

/** The number of keys in a parsed JSON value, nested objects included. */
function countKeys(value: unknown): number {
  let keys = 0
  // An explicit stack, not recursion (a 16 KiB body can nest 8,000 deep), made only when a
  // value holds another object or array: a NewPet is counted without allocating.
  let pending: object[] | undefined
  const visit = (child: unknown) => {
    if (typeof child !== 'object' || child === null) return
    pending ??= []
    pending.push(child)
  }
  for (let item = value; typeof item === 'object' && item !== null; item = pending?.pop()) {
    if (Array.isArray(item)) {
      for (const child of item) visit(child)
      continue
    }
    for (const key in item) {
      // Own keys only: an enumerable property someone added to Object.prototype is not the body's.
      if (!Object.hasOwn(item, key)) continue
      keys += 1
      visit((item as Record<string, unknown>)[key])
    }
  }
  return keys
}

/**
 * False when no key can appear twice. In valid JSON every key is followed by a colon and a colon
 * outside a string follows a key, so the text holds at least as many colons as keys; JSON.parse
 * gives each object one own property per distinct key (`__proto__` included). So if the colons
 * are no more than the parsed keys, the text's keys are all distinct. More colons mean a
 * duplicate or a colon inside a string (`"12:30"`), and the exact scan tells which. A fraction
 * of a microsecond even on 16 KiB of white space (docs/benchmarks.md, "Measurements behind
 * choices in the code").
 */
function mayHaveDuplicateKeys(text: string, value: unknown): boolean {
  const keys = countKeys(value)
  let colons = 0
  for (let at = text.indexOf(':'); at !== -1; at = text.indexOf(':', at + 1)) {
    colons += 1
    if (colons > keys) return true
  }
  return false
}

/**
 * The first key that appears twice in one object, at any depth, compared after unescaping
 * (`"\u006eame"` is `"name"`); undefined when every key is unique. The text is one JSON.parse
 * has accepted, so a `"` outside a string starts one, and the first `"` after it that is not
 * escaped (preceded by an odd number of backslashes) ends it. Strings are skipped with indexOf;
 * everything else is read a character at a time, which bounds the cost by the body's length,
 * where a regular-expression search costs more per token. On the worst 16 KiB body it costs
 * less than JSON.parse took on it (docs/benchmarks.md, "Measurements behind choices in the
 * code").
 */
function findDuplicateKey(text: string): { key: string; nested: boolean } | undefined {
  // One entry per open bracket, innermost last. An array is null. An object is its keys so far:
  // undefined before the first, the key itself while it has one (so that deep nests and
  // `[{"a":1},{"a":2},…]` allocate no Set), then a Set.
  const open: (Set<string> | string | undefined | null)[] = []
  for (let at = 0; at < text.length; at++) {
    const char = text.charCodeAt(at)
    if (char === 0x7b /* { */) open.push(undefined)
    else if (char === 0x5b /* [ */) open.push(null)
    else if (char === 0x7d /* } */ || char === 0x5d /* ] */) open.pop()
    if (char !== 0x22 /* " */) continue
    const start = at
    let end = text.indexOf('"', start + 1)
    for (;;) {
      let backslashes = 0
      while (text.charCodeAt(end - 1 - backslashes) === 0x5c /* \ */) backslashes += 1
      if (backslashes % 2 === 0) break
      end = text.indexOf('"', end + 1)
    }
    // A key is a string followed by a colon, after any JSON white space.
    at = end + 1
    let after = text.charCodeAt(at)
    while (after === 0x20 || after === 0x0a || after === 0x0d || after === 0x09) {
      at += 1
      after = text.charCodeAt(at)
    }
    if (after !== 0x3a /* : */) {
      at -= 1 // the loop's at++ then reads the character after the white space
      continue
    }
    const raw = text.slice(start + 1, end)
    const key = raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw
    const depth = open.length - 1
    const keys = open[depth]
    if (keys === undefined || keys === null) {
      open[depth] = key
    } else if (typeof keys === 'string') {
      if (keys === key) return { key, nested: depth > 0 }
      open[depth] = new Set([keys, key])
    } else {
      if (keys.has(key)) return { key, nested: depth > 0 }
      keys.add(key)
    }
  }
  return undefined
}

/** A key for a message: quoted, and cut short if long, so the message stays readable. */
function quoteKey(key: string): string {
  const points = [...key]
  return points.length > 64
    ? `${JSON.stringify(points.slice(0, 64).join(''))}…`
    : JSON.stringify(key)
}

// ---- The parser ----

/**
 * A request body's bytes to the value it holds, or an ApiError (400) naming the first problem:
 * invalid UTF-8, malformed JSON, an integer written inexactly, a key given twice. What the
 * UTF-8 and key checks add was measured beside a parser without them (docs/benchmarks.md,
 * "Measurements behind choices in the code").
 */
export function parseJsonBody(bytes: Buffer): unknown {
  const text = decodeUtf8(bytes)
  let value: unknown
  try {
    value = MAY_HAVE_INEXACT_NUMBER.test(text)
      ? JSON.parse(text, refuseInexactIntegers)
      : JSON.parse(text)
  } catch (err) {
    if (err instanceof ApiError) throw err
    throw new ApiError(
      'invalid_request',
      text.charCodeAt(0) === 0xfeff
        ? 'body starts with a byte order mark (U+FEFF), which JSON sent over a network must not have (RFC 8259 §8.1)'
        : 'body is not valid JSON',
    )
  }
  const duplicate = mayHaveDuplicateKeys(text, value) ? findDuplicateKey(text) : undefined
  if (duplicate !== undefined) {
    throw new ApiError(
      'invalid_request',
      `body has the ${duplicate.nested ? 'key' : 'field'} ${quoteKey(duplicate.key)} more than once${duplicate.nested ? ' in one object' : ''}; each must appear once (RFC 8259 §4)`,
    )
  }
  return value
}

export const jsonBody = fp(async (app) => {
  // JSON is the only body type (D6): without Fastify's default text/plain parser, any other
  // Content-Type is a 415 instead of a string that fails the body schema with a 400.
  app.removeContentTypeParser('text/plain')
  app.removeContentTypeParser('application/json')
  // Bytes, not a string: Fastify's string decoding would already have replaced invalid UTF-8.
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    try {
      checkCharset(request.headers['content-type'])
      done(null, parseJsonBody(body as Buffer))
    } catch (err) {
      done(err as Error, undefined)
    }
  })
})
