// D13: security headers on every response, and D8's X-Request-Id with them; CORS only for
// configured origins.

import { IncomingMessage, ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import cors from '@fastify/cors'
import fp from 'fastify-plugin'
import helmet from 'helmet'
import { ApiError } from '../../errors.ts'
import { setReplyHeader, startReplyHeaders } from '../internals.ts'

/** Headers a browser client may read (D13). */
export const EXPOSED_HEADERS = [
  'Link',
  'Location',
  'Deprecation',
  'Sunset',
  'RateLimit',
  'RateLimit-Policy',
  'Retry-After',
  'X-Request-Id',
  'Idempotent-Replayed',
  // D29: what a staging instance says of a rehearsal or a random fault (never sent in production).
  'Preference-Applied',
  'Petstore-Staging-Fault',
]

/**
 * What every answer of the API carries (D13), after OWASP's REST Security Cheat Sheet ("Security
 * Headers": the headers to include in all API responses): a JSON answer is never a page, so its
 * CSP allows nothing and no framing, MIME sniffing is off, framing is denied the old way too,
 * browsers keep to HTTPS, and no Referer leaks a URL. Helmet's other headers (COOP, CORP,
 * Origin-Agent-Cluster, X-DNS-Prefetch-Control, X-Download-Options,
 * X-Permitted-Cross-Domain-Policies, X-XSS-Protection) govern how a browser renders and isolates
 * a *page*; they stay on the one HTML page we serve, /docs (`htmlSecurityHeaders`).
 * `Cache-Control: no-store`, also on the cheat sheet's list, is added by the app to the
 * operations, whose answers depend on the key (app.ts).
 */
export const API_SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'strict-transport-security': 'max-age=31536000; includeSubDomains',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
})

/**
 * The headers helmet's defaults set (CSP, nosniff, frame denial, HSTS, no referrer leaks, …),
 * for /docs. They do not depend on the request, so helmet's middleware runs once, here, against
 * a collector of the headers it sets, and every page answer gets the same frozen object. Run per
 * request (as @fastify/helmet does, rebuilding the middleware and re-parsing the CSP), it cost
 * a quarter of getPet's CPU and its garbage doubled the memory under load, when measured
 * (docs/benchmarks.md).
 */
function helmetHeaders(): Readonly<Record<string, string>> {
  // helmet's defaults read nothing from the request: a response of a request on no connection
  // is all it needs, and nothing is ever written to it.
  const response = new ServerResponse(new IncomingMessage(new Socket()))
  helmet()(response.req, response, (err?: unknown) => {
    if (err) throw err
  })
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(response.getHeaders())) {
    if (value !== undefined) headers[name] = String(value)
  }
  return Object.freeze(headers)
}

let html: Readonly<Record<string, string>> | undefined

/** Helmet's default set, for the HTML page and its assets (/docs), computed once per process. */
export function htmlSecurityHeaders(): Readonly<Record<string, string>> {
  html ??= helmetHeaders()
  return html
}

/**
 * The security headers every answer carries (D13). Answers made outside the app's hooks
 * (routing errors, the server's HTTP-layer errors, D16) use them too.
 */
export function securityHeaders(): Readonly<Record<string, string>> {
  return API_SECURITY_HEADERS
}

export const security = fp<{ corsOrigins: readonly string[] }>(async (app, { corsOrigins }) => {
  // The /docs page sets helmet's HTML set and its own CSP over these (plugins/docs-page.ts).
  // One callback hook for both, the first of every request: whatever answers next (CORS, load
  // shedding, auth, a route) answers with them.
  const headers = securityHeaders()
  app.addHook('onRequest', (request, reply, done) => {
    // In one copy, not a call of reply.header per name (internals.ts).
    startReplyHeaders(reply, headers)
    setReplyHeader(reply, 'x-request-id', request.id)
    done()
  })

  if (corsOrigins.length > 0) {
    // @fastify/cors answers an OPTIONS that is not a preflight with a text/plain 400; D4 wants
    // the Error body, so such a request is refused here first (this hook runs before its hook).
    app.addHook('onRequest', async (request) => {
      const { origin, 'access-control-request-method': method } = request.headers
      if (request.method === 'OPTIONS' && (origin === undefined || method === undefined)) {
        throw new ApiError(
          'invalid_request',
          'OPTIONS is answered only as a CORS preflight: Origin and Access-Control-Request-Method are required',
        )
      }
    })
    await app.register(cors, {
      origin: corsOrigins.includes('*') ? '*' : [...corsOrigins],
      methods: ['GET', 'HEAD', 'POST'],
      // Prefer: honoured in staging (D29), ignored in production, asked for by the same client code.
      allowedHeaders: [
        'Authorization',
        'Content-Type',
        'X-Request-Id',
        'Idempotency-Key',
        'Prefer',
      ],
      exposedHeaders: EXPOSED_HEADERS,
      maxAge: 600,
    })
  }
})
