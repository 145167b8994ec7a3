// D8, D17: one log line per request, at info, written when the response is finished: method,
// route template, redacted URL, status, duration, the client's address, request id, the key's id
// (never the key), the error code of an error, and the trace id of a valid W3C `traceparent`;
// with tracing on (D23), the trace and span ids of the request's server span. It replaces Fastify's
// two lines ("incoming request" without status, "request completed" without route or key).
// Problems keep lines of their own at warn and error (a 500's cause, an outage, shedding), so
// LOG_LEVEL=warn keeps those and drops the per-request lines.
import type { FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { codeForStatus } from '../../errors.ts'
import { redactUrl } from '../../observability/logging.ts'
import { clientAddress } from '../../rate-limit/client-address.ts'
import { routeTemplate } from './metrics.ts'

/**
 * W3C Trace Context §3.2: `version-traceid-parentid-flags`, lowercase hex. Version ff is
 * invalid; version 00 has exactly these four fields; a later version may append fields after a
 * dash. An all-zero trace id or parent id is invalid.
 */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-.*)?$/

export function traceIdOf(header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string') return undefined
  const match = TRACEPARENT.exec(header)
  if (match === null) return undefined
  const [, version, traceId, parentId, rest] = match
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined
  if (/^0+$/.test(traceId ?? '') || /^0+$/.test(parentId ?? '')) return undefined
  return traceId
}

interface RequestLine {
  method: string
  route: string
  url: string
  status: number
  durationMs: number
  /**
   * The client's address: the peer's, or from X-Forwarded-For behind a trusted balancer, without
   * a port (rate-limit/client-address.ts).
   */
  client: string | undefined
  keyId?: string
  errorCode?: string
  /** D29: what staging did to the request (a rehearsal asked for, or a random fault). */
  staging?: string
  traceId?: string
  spanId?: string
}

function requestLine(request: FastifyRequest, reply: FastifyReply, tracing: boolean): RequestLine {
  const status = reply.statusCode
  const line: RequestLine = {
    method: request.method,
    route: routeTemplate(request.routeOptions.url),
    url: redactUrl(request.url),
    status,
    durationMs: Math.round(reply.elapsedTime * 100) / 100,
    client: clientAddress(request),
  }
  // Set by auth (plugins/auth.ts) only under /v1, and only once the key is valid.
  if (request.apiKeyId) line.keyId = request.apiKeyId
  if (status >= 400) line.errorCode = reply.errorCode ?? codeForStatus(status)
  if (request.staging !== undefined) line.staging = request.staging
  // D23: with tracing on, the ids of its server span (plugins/tracing.ts), sampled or not.
  if (tracing) {
    const span = request.serverSpan?.spanContext()
    if (span !== undefined) {
      line.traceId = span.traceId
      line.spanId = span.spanId
    }
    return line
  }
  const traceId = traceIdOf(request.headers.traceparent)
  if (traceId !== undefined) line.traceId = traceId
  return line
}

/** Levels at which info lines are written (FastifyBaseLogger has no isLevelEnabled). */
export const INFO_OR_LOWER: ReadonlySet<string> = new Set(['info', 'debug', 'trace'])

/**
 * Said once per app (one a process), when X-Forwarded-For comes and no balancer is trusted: the
 * header is ignored, so behind a balancer every client is the balancer, in these lines and in the
 * failed-authentication limit (D3), which would then refuse everyone behind it at once.
 */
export const FORWARDING_IGNORED =
  "X-Forwarded-For is ignored: PETSTORE_TRUSTED_PROXIES names no balancer, so a client is its connection's peer; if a balancer sends the header, name it in PETSTORE_TRUSTED_PROXIES, or all its clients count as one address (in the logs and the failed-authentication limit)"

export interface RequestLogOptions {
  /** D23: tracing is on; the line carries its span's ids. */
  tracing?: boolean
  /** PETSTORE_TRUSTED_PROXIES names balancers; without, FORWARDING_IGNORED is said once. */
  trustsForwarding?: boolean
}

/** Registered only when the logger writes info lines (app.ts); LOG_LEVEL is read once, at start. */
export const requestLog = fp<RequestLogOptions>(
  async (app, { tracing = false, trustsForwarding = false }) => {
    // Once said (or with balancers trusted), one boolean a request; before, one header look-up.
    let forwardingTold = trustsForwarding
    app.addHook('onResponse', (request, reply, done) => {
      request.log.info(requestLine(request, reply, tracing), 'request completed')
      if (!forwardingTold && request.headers['x-forwarded-for'] !== undefined) {
        forwardingTold = true
        request.log.warn({ peer: request.ip }, FORWARDING_IGNORED)
      }
      done()
    })
  },
  { name: 'request-log' },
)
