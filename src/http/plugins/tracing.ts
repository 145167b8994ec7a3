// D23: the server span of each request, while tracing is on (app.ts loads this module only
// then). @opentelemetry/instrumentation-http makes the span as the request arrives, continuing
// a caller's W3C traceparent; @fastify/otel, registered here first, adds Fastify's request span
// under it and sets the route, which names the server span when it ends. Here the route is
// given in the OpenAPI form (`GET /v1/pets/{petId}`, as metrics and logs name it), and the
// server span gets what only the service knows: the API key's id (never the key), the error
// code of a failure, the Idempotency-Key outcome (D14), and the client address as the log has
// it (X-Forwarded-For believed only from PETSTORE_TRUSTED_PROXIES).
import { type Attributes, context, type Span, trace } from '@opentelemetry/api'
import { getRPCMetadata, RPCType } from '@opentelemetry/core'
import type { FastifyPluginCallback, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { codeForStatus } from '../../errors.ts'
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
  const attributes: Attributes = { 'client.address': request.ip }
  if (request.apiKeyId) attributes[ATTRIBUTES.keyId] = request.apiKeyId
  if (reply.statusCode >= 400) {
    attributes[ATTRIBUTES.errorCode] = reply.errorCode ?? codeForStatus(reply.statusCode)
  }
  const outcome = idempotencyOutcome(request, reply)
  if (outcome !== undefined) attributes[ATTRIBUTES.idempotency] = outcome
  return attributes
}

export interface TracingOptions {
  /** @fastify/otel's plugin, from the instrumentation tracing/start.ts made. */
  fastifyOtel: FastifyPluginCallback
}

/** Registered before any route: @fastify/otel sees each route as it is added. */
export const tracing = fp<TracingOptions>(
  async (app, { fastifyOtel }) => {
    await app.register(fastifyOtel)
    app.decorateRequest('serverSpan', undefined)
    // After @fastify/otel's onRequest, in the context it entered: its request span is the
    // active one, and the context holds the server span's route slot.
    app.addHook('onRequest', (request, _reply, done) => {
      const active = context.active()
      const rpc = getRPCMetadata(active)
      if (rpc?.type === RPCType.HTTP) {
        request.serverSpan = rpc.span
        const route = request.routeOptions.url
        if (route !== undefined) {
          rpc.route = routeTemplate(route)
          trace.getSpan(active)?.setAttribute('http.route', rpc.route)
        }
      }
      done()
    })
    // onSend, not onResponse: the server span may end as the response finishes.
    app.addHook('onSend', (request, reply, payload, done) => {
      const span = request.serverSpan
      if (span?.isRecording()) span.setAttributes(answerAttributes(request, reply))
      done(null, payload)
    })
  },
  { name: 'tracing' },
)
