// D4: every error is application/json {code, message, status}, framework errors included.
// One handler maps whatever was thrown; 5xx bodies never carry internals (they go to the log).
import type {
  FastifyError,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  HTTPMethods,
} from 'fastify'
import fp from 'fastify-plugin'
import { BODY_LIMIT_BYTES } from '../../contract/limits.ts'
import { ApiError, codeForStatus, type ErrorCode, errorBody } from '../../errors.ts'
import { IdempotencyKeyInUseError, StoreUnavailableError } from '../../store/store.ts'

/** The one place the store's errors become HTTP's (the store knows no HTTP). */
function fromStoreError(err: unknown): ApiError | undefined {
  // D16: unreachable, locked past its wait, or unable to store: retry later.
  if (err instanceof StoreUnavailableError) {
    return new ApiError('unavailable', `${err.reason}; retry later`, {
      'retry-after': String(err.retryAfterSeconds),
    })
  }
  // D14: the key is held by a request still being processed.
  if (err instanceof IdempotencyKeyInUseError) {
    return new ApiError(
      'idempotency_key_in_use',
      'a request with this Idempotency-Key is still being processed; retry in 1 s',
      { 'retry-after': '1' },
    )
  }
  return undefined
}

function fromFrameworkError(err: FastifyError): ApiError {
  if (err instanceof ApiError) return err
  if (err.validation) return new ApiError('invalid_request', err.message)
  const fromStore = fromStoreError(err)
  if (fromStore !== undefined) return fromStore
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError(
        'payload_too_large',
        `request body is larger than ${BODY_LIMIT_BYTES} bytes`,
      )
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('unsupported_media_type', 'Content-Type must be application/json')
    case 'FST_ERR_BAD_URL':
      return new ApiError('invalid_request', 'the URL is not valid: it has a malformed %-escape')
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new ApiError('invalid_request', 'the URL is not valid: a path segment is too long')
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('invalid_request', 'body is empty; a JSON object is required')
  }
  const status = err.statusCode ?? 500
  if (status >= 400 && status < 500) return new ApiError(codeForStatus(status), err.message)
  return new ApiError(
    'internal_error',
    'an unexpected error occurred; quote the X-Request-Id when reporting it',
  )
}

/**
 * Sends any thrown error as the Error body; 5xx are logged with their cause, never sent. A
 * database that fails (StoreUnavailableError) is logged by the store, once for the whole outage
 * (store/outages.ts, D16): a line with a stack per request would flood the log.
 */
function sendError(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const apiError = fromFrameworkError(err)
  reply.errorCode = apiError.code
  if (apiError.statusCode >= 500 && !(err instanceof StoreUnavailableError)) {
    request.log.error({ err }, 'request failed')
  }
  // A body over the limit is left unread; closing the connection spares reading it to the end
  // to find the next request (D16).
  if (apiError.statusCode === 413) reply.header('connection', 'close')
  reply.code(apiError.statusCode).headers(apiError.headers).send(apiError.toBody())
}

/**
 * Fastify's `frameworkErrors`: errors raised while routing, before any hook runs (a URL with a
 * malformed %-escape, a path parameter over the router's length limit). Fastify's own reply has
 * another body shape and echoes the path; D4 wants the Error body, and D13 the security headers
 * that the hooks would have set.
 */
export function frameworkErrors(headers: Readonly<Record<string, string>>) {
  return (err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    reply.headers(headers).header('x-request-id', request.id)
    sendError(err, request, reply)
  }
}

declare module 'fastify' {
  interface FastifyReply {
    /** The Error body's code, once an error was sent (for the request's log line, D17). */
    errorCode: ErrorCode | undefined
  }
}

export const errorHandling = fp(async (app) => {
  app.decorateReply('errorCode', undefined)
  app.setErrorHandler(sendError)

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?', 1)[0]?.slice(0, 200)
    reply.code(404).send(errorBody('not_found', `no route ${request.method} ${path}`))
  })
})

const METHODS: HTTPMethods[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']

/**
 * Fastify answers a known path with an unknown method 404; D4 wants 405 with `Allow`
 * (RFC 9110 §15.5.6). Call before registering routes; it records every route and, once they
 * are in (register the returned plugin last), adds a 405 route for the methods each path lacks.
 */
export function methodNotAllowed(app: FastifyInstance) {
  const methodsByPath = new Map<string, Set<string>>()
  app.addHook('onRoute', (route) => {
    const methods = methodsByPath.get(route.url) ?? new Set<string>()
    for (const method of [route.method].flat()) methods.add(method)
    methodsByPath.set(route.url, methods)
  })
  return async function rejectOtherMethods(scope: FastifyInstance) {
    // A catch-all OPTIONS route (CORS preflight) must keep answering OPTIONS everywhere.
    const preflight = methodsByPath.get('*')?.has('OPTIONS') ?? false
    for (const [url, allowed] of [...methodsByPath]) {
      if (url === '*') continue
      // hasRoute: some plugins add routes onRoute never reports (swagger-ui's GET /docs/).
      const others = METHODS.filter(
        (method) =>
          !allowed.has(method) &&
          !(preflight && method === 'OPTIONS') &&
          !scope.hasRoute({ url, method }),
      )
      if (others.length === 0) continue
      const allow = METHODS.filter((m) => allowed.has(m)).join(', ')
      scope.route({
        method: others,
        url,
        handler: async (request) => {
          throw new ApiError(
            'method_not_allowed',
            `${request.method} is not allowed here; use ${allow}`,
            {
              allow,
            },
          )
        },
      })
    }
  }
}
