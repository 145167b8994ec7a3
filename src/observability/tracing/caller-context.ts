// D23: whose trace context the service follows. A caller's W3C `traceparent` and `tracestate`
// are followed only when the request's direct peer (the TCP connection's remote address) is one
// of PETSTORE_TRUSTED_PROXIES, the hops the operator vouches for. From any other peer they are
// the client's own claim: following them would let any client have every one of its requests
// sampled (filling the span queue and the collector), put our spans into a trace id of its
// choosing, and have its tracestate exported as sent (W3C Trace Context §7.2, "Denial of
// Service"). Such a request starts a trace of its own, sampled by the root sampler (the ratio),
// its tracestate dropped: the "restart trace" of §3.4. Its server span, when sampled, links to
// the caller's span context (without the tracestate), so a caller's trace can still be joined.
//
// The peer is known to Fastify, the carrier to the propagator: an onRequest hook ahead of
// @fastify/otel's marks the active context of a trusted peer's request, and the propagator,
// which @fastify/otel calls with that context (propagation.extract(context.active(), headers),
// @fastify/otel 0.21), follows the headers only when the mark is there. Any other extract,
// marked by nobody, follows nothing: a mistake here fails closed.
import {
  type Context,
  context,
  createContextKey,
  type SpanContext,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
  trace,
} from '@opentelemetry/api'
import type { FastifyPluginCallback, onRequestHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import { trustedHops } from '../../rate-limit/client-address.ts'

/** On the context of a request whose direct peer is trusted. */
const TRUSTED_PEER = createContextKey('petstore: the peer is trusted for trace context')
/** The span context an untrusted caller sent, tracestate dropped: the server span's link. */
const UNTRUSTED_CALLER = createContextKey('petstore: the span context an untrusted caller sent')

/** Whether a peer's address is one of PETSTORE_TRUSTED_PROXIES. */
export type PeerCheck = (address: string | undefined) => boolean

/**
 * The same check as Fastify's trustProxy makes of a hop (app.ts, rate-limit/client-address.ts):
 * one list, one matcher, so the peers believed for X-Forwarded-For are those believed for trace
 * context. Loopback is trusted only when listed. A peer already gone has no address.
 */
export function trustedPeers(entries: readonly string[]): PeerCheck {
  if (entries.length === 0) return () => false
  const isTrustedHop = trustedHops(entries)
  return (address) => address !== undefined && isTrustedHop(address)
}

/** `ctx` as the context of a trusted peer's request: the propagator follows its headers. */
export function fromTrustedPeer(ctx: Context): Context {
  return ctx.setValue(TRUSTED_PEER, true)
}

/** The span context an untrusted caller sent (tracestate dropped), if it sent one. */
export function untrustedCaller(ctx: Context): SpanContext | undefined {
  // Only the propagator below sets it, to a SpanContext.
  return ctx.getValue(UNTRUSTED_CALLER) as SpanContext | undefined
}

/** W3C Trace Context (`inner`), extracted only on a trusted peer's request. */
export class TrustedPeerPropagator implements TextMapPropagator {
  readonly #inner: TextMapPropagator

  constructor(inner: TextMapPropagator) {
    this.#inner = inner
  }

  inject(ctx: Context, carrier: unknown, setter: TextMapSetter): void {
    this.#inner.inject(ctx, carrier, setter)
  }

  extract(ctx: Context, carrier: unknown, getter: TextMapGetter): Context {
    const extracted = this.#inner.extract(ctx, carrier, getter)
    if (ctx.getValue(TRUSTED_PEER) === true) return extracted
    const caller = trace.getSpanContext(extracted)
    if (caller === undefined) return ctx
    // The link carries no tracestate either: it is exported as the span's own would be.
    const { traceState: _dropped, ...untrusted } = caller
    return ctx.setValue(UNTRUSTED_CALLER, untrusted)
  }

  fields(): string[] {
    return this.#inner.fields()
  }
}

/**
 * @fastify/otel's plugin (`otel`) between two hooks of ours: before its onRequest, a trusted
 * peer's request is marked for the propagator; after it, in the context it entered, the server
 * span of an untrusted caller links to the context it sent (a link added after the span started
 * plays no part in sampling, which is the point).
 */
export function followingTrustedPeers(
  otel: FastifyPluginCallback,
  trusted: PeerCheck,
): FastifyPluginCallback {
  const markTrustedPeer: onRequestHookHandler = (request, _reply, done) => {
    if (!trusted(request.socket.remoteAddress)) return done()
    // @fastify/otel's onRequest runs inside `done`, with this as the active context.
    context.with(fromTrustedPeer(context.active()), done)
  }
  const linkUntrustedCaller: onRequestHookHandler = (_request, _reply, done) => {
    const active = context.active()
    const caller = untrustedCaller(active)
    const span = trace.getSpan(active)
    if (caller !== undefined && span?.isRecording()) span.addLink({ context: caller })
    done()
  }
  return fp(
    async (app) => {
      app.addHook('onRequest', markTrustedPeer)
      await app.register(otel)
      app.addHook('onRequest', linkUntrustedCaller)
    },
    { name: 'trace-context-from-trusted-peers' },
  )
}
