// D13: security headers on every response; CORS only for configured origins.
import cors from '@fastify/cors'
import helmet from '@fastify/helmet'
import Fastify from 'fastify'
import fp from 'fastify-plugin'
import { ApiError } from '../errors.ts'

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
]

/**
 * The headers helmet's defaults set (CSP, nosniff, frame denial, HSTS, no referrer leaks, …),
 * taken once from a throw-away app. They do not depend on the request, but @fastify/helmet
 * rebuilds helmet's middleware and re-parses the CSP on every request, for the same dozen
 * constant strings: measured, that cost 20 µs of CPU per request (getPet 69 → 89 µs) and its
 * garbage doubled the memory under load (154 → 305 MB RSS; docs/benchmarks.md).
 */
async function helmetHeaders(): Promise<Readonly<Record<string, string>>> {
  const probe = async (withHelmet: boolean) => {
    const app = Fastify()
    if (withHelmet) await app.register(helmet, { global: true })
    app.get('/', async () => '')
    const { headers } = await app.inject('/')
    await app.close()
    return headers
  }
  const plain = await probe(false)
  const helmeted = await probe(true)
  return Object.freeze(
    Object.fromEntries(
      Object.entries(helmeted)
        .filter(([name]) => !(name in plain))
        .map(([name, value]) => [name, String(value)]),
    ),
  )
}

let computed: Promise<Readonly<Record<string, string>>> | undefined

/**
 * The security headers every response carries (D13), computed once per process. Answers made
 * outside the app's hooks (routing errors, the server's HTTP-layer errors, D16) use them too.
 */
export function securityHeaders(): Promise<Readonly<Record<string, string>>> {
  computed ??= helmetHeaders()
  return computed
}

export const security = fp<{ corsOrigins: readonly string[] }>(async (app, { corsOrigins }) => {
  // The /docs page sets its own CSP for its assets (plugins/openapi.ts), over this one.
  const headers = await securityHeaders()
  app.addHook('onRequest', (_request, reply, done) => {
    reply.headers(headers)
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
      allowedHeaders: ['Authorization', 'Content-Type', 'X-Request-Id', 'Idempotency-Key'],
      exposedHeaders: EXPOSED_HEADERS,
      maxAge: 600,
    })
  }
})
