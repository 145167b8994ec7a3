// D23: the server span of each request, while tracing is on (app.ts loads this module only
// then). @fastify/otel, registered here first, makes it as a request arrives, continuing a
// caller's W3C traceparent only when the connection's peer is one of PETSTORE_TRUSTED_PROXIES
// (observability/tracing/caller-context.ts), and ends it with the status. Here it is
// named by the route in the OpenAPI form (`GET /v1/pets/{petId}`, as metrics and logs name it)
// and given the HTTP semantic conventions' attributes and what only the service knows: the API
// key's id (never the key), the error code of a failure, the Idempotency-Key outcome (D14), and
// the client address as the log has it (X-Forwarded-For believed only from
// PETSTORE_TRUSTED_PROXIES).
import { type Attributes, context, type Span, SpanStatusCode, trace } from '@opentelemetry/api'
import type { FastifyPluginCallback, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { codeForStatus } from '../../errors.ts'
import { clientAddress } from '../../rate-limit/client-address.ts'
import { routeTemplate } from './metrics.ts'

declare module 'fastify' {
  interface FastifyRequest {
    /** D23: the request's server span, while tracing is on (the request log reads its ids). */
    serverSpan: Span | undefined
  }
}

/** Our attributes, named as OpenTelemetry asks of one's own: under a namespace. */
export const ATTRIBUTES = {
  keyId: 'petstore.api_key.id',
  errorCode: 'petstore.error.code',
  idempotency: 'petstore.idempotency_key.outcome',
} as const

/** The HTTP server span's attributes known as the request arrives (semantic conventions). */
function requestAttributes(request: FastifyRequest, route: string | undefined): Attributes {
  const attributes: Attributes = {
    'url.scheme': request.protocol,
    'url.path': request.url.split('?', 1)[0] ?? '',
    'network.protocol.version': request.raw.httpVersion,
    'client.address': clientAddress(request),
  }
  const query = request.url.indexOf('?')
  if (query !== -1) attributes['url.query'] = request.url.slice(query + 1)
  if (route !== undefined) attributes['http.route'] = route
  const host = request.hostname
  if (host) attributes['server.address'] = host
  const port = request.port
  if (port) attributes['server.port'] = port
  const agent = request.headers['user-agent']
  if (agent !== undefined) attributes['user_agent.original'] = agent
  return attributes
}

/** What an Idempotency-Key did for this create (D14), from the answer it got. */
function idempotencyOutcome(request: FastifyRequest, reply: FastifyReply): string | undefined {
  if (request.headers['idempotency-key'] === undefined) return undefined
  if (reply.statusCode === 201) {
    return reply.getHeader('idempotent-replayed') === 'true' ? 'replayed' : 'created'
  }
  if (reply.errorCode === 'idempotency_key_in_use') return 'in_use'
  if (reply.errorCode === 'idempotency_key_reused') return 'reused'
  return undefined
}

function answerAttributes(request: FastifyRequest, reply: FastifyReply): Attributes {
  const attributes: Attributes = {}
  if (request.apiKeyId) attributes[ATTRIBUTES.keyId] = request.apiKeyId
  if (reply.statusCode >= 400) {
    const code = reply.errorCode ?? codeForStatus(reply.statusCode)
    attributes[ATTRIBUTES.errorCode] = code
    // The semantic conventions' error.type for a 5xx: the service's own code names it best.
    if (reply.statusCode >= 500) attributes['error.type'] = code
  }
  const outcome = idempotencyOutcome(request, reply)
  if (outcome !== undefined) attributes[ATTRIBUTES.idempotency] = outcome
  return attributes
}

export interface TracingOptions {
  /** @fastify/otel's plugin and its peer check, from the instrumentation tracing/start.ts made. */
  fastifyOtel: FastifyPluginCallback
}

/** Registered before any route: @fastify/otel sees each route as it is added. */
export const tracing = fp<TracingOptions>(
  async (app, { fastifyOtel }) => {
    await app.register(fastifyOtel)
    app.decorateRequest('serverSpan', undefined)
    // After @fastify/otel's onRequest, in the context it entered, whose span is the request's.
    app.addHook('onRequest', (request, _reply, done) => {
      const span = trace.getSpan(context.active())
      if (span?.isRecording()) {
        const url = request.routeOptions.url
        const route = url === undefined ? undefined : routeTemplate(url)
        // Semantic conventions: `{method} {route}`, or the method alone when no route matched.
        span.updateName(route === undefined ? request.method : `${request.method} ${route}`)
        span.setAttributes(requestAttributes(request, route))
      }
      request.serverSpan = span
      done()
    })
    // Before @fastify/otel's onSend, a route's own, which ends the span.
    app.addHook('onSend', (request, reply, payload, done) => {
      const span = request.serverSpan
      if (span?.isRecording()) {
        span.setAttributes(answerAttributes(request, reply))
        // @fastify/otel marks every error thrown ERROR; a 4xx is the client's, not the
        // server's (semantic conventions), and a status never goes back to unset: OK.
        if (reply.statusCode >= 400 && reply.statusCode < 500) {
          span.setStatus({ code: SpanStatusCode.OK })
        }
      }
      done(null, payload)
    })
  },
  { name: 'tracing' },
)
