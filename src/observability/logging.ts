// JSON logs (pino, through Fastify). Credentials never reach them (D8, D16): the Authorization
// header is censored, and so are credentials in the request's URL, where a client may have put
// one (`?access_token=…`, `?api_key=…`, or a key of ours anywhere in the path or query).
import type { FastifyRequest } from 'fastify'
import type { Config } from '../config.ts'

const REDACTED = '[redacted]'

/** Query parameters whose name says they carry a credential (RFC 6750 §2.3's access_token, …). */
const CREDENTIAL_NAME =
  /^(access_?token|api_?key|apikey|key|token|auth|authorization|secret|password|passwd|pwd|client_secret|signature|sig|session|jwt|bearer)$/i

/** A key of ours (contract/api-key.ts), wherever it appears: prefix and base62 body. */
const OUR_KEY = /petstore_(?:live|staging)_[0-9A-Za-z]{8,}/g

function parameterName(pair: string): string {
  const raw = pair.slice(0, pair.indexOf('=') === -1 ? pair.length : pair.indexOf('='))
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '))
  } catch {
    return raw
  }
}

/** The URL as it may be logged: credential-like query values and our keys replaced. */
export function redactUrl(url: string): string {
  const withoutKeys = url.replace(OUR_KEY, REDACTED)
  const question = withoutKeys.indexOf('?')
  if (question === -1) return withoutKeys
  const query = withoutKeys
    .slice(question + 1)
    .split('&')
    .map((pair) =>
      CREDENTIAL_NAME.test(parameterName(pair)) ? `${pair.split('=', 1)[0]}=${REDACTED}` : pair,
    )
    .join('&')
  return `${withoutKeys.slice(0, question)}?${query}`
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
    remoteAddress: request.ip,
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
