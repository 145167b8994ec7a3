// D17: every request the app answers is timed into http_server_request_duration_seconds, with
// OTel's labels: the method (unknown ones as `_OTHER`), the route *template* (never the path, so
// a scanner cannot add label values: a path no route matches is the empty route) and the status.
//
// Each route gets its own onResponse hook when it is added, with its template worked out once;
// one app-wide hook times the answers no route gave (404s). Fastify's `request.routeOptions`,
// the obvious way to find the route, builds a new object on every read.
import type { FastifyReply, FastifyRequest, onResponseHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import type { Metrics } from '../../observability/metrics.ts'

/** OTel's http.request.method: the methods of RFC 9110 and PATCH; any other is `_OTHER`. */
const KNOWN_METHODS = new Set([
  'GET',
  'HEAD',
  'POST',
  'PUT',
  'DELETE',
  'CONNECT',
  'OPTIONS',
  'TRACE',
  'PATCH',
])

/** The route as OpenAPI writes it: `/v1/pets/:petId` → `/v1/pets/{petId}`. */
export function routeTemplate(url: string | undefined): string {
  if (url === undefined) return ''
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}')
}

/** One answer, timed into `route`'s series. */
function record(metrics: Metrics, route: string, request: FastifyRequest, reply: FastifyReply) {
  const method = KNOWN_METHODS.has(request.method) ? request.method : '_OTHER'
  const status = reply.statusCode
  metrics.request(method, route, status, reply.elapsedTime / 1000)
  // D14: the route marks a replay (always a 201: only those are recorded) with this header;
  // counted here, with the rest of the answer.
  if (status === 201 && reply.getHeader('idempotent-replayed') === 'true') metrics.replayed()
}

/** The hook that times each answer of one route. */
function timeInto(metrics: Metrics, route: string): onResponseHookHandler {
  return function timeAnswer(request, reply, done) {
    record(metrics, route, request, reply)
    done()
  }
}

export const httpMetrics = fp<{ metrics: Metrics }>(
  async (app, { metrics }) => {
    app.addHook('onRoute', (route) => {
      const existing = route.onResponse === undefined ? [] : [route.onResponse].flat()
      route.onResponse = [timeInto(metrics, routeTemplate(route.url)), ...existing]
    })
    // App-wide hooks run for every request, the not-found handler's included; only those
    // answers are timed here. `is404` reads the route's url, building nothing.
    app.addHook('onResponse', (request, reply, done) => {
      if (request.is404) record(metrics, '', request, reply)
      done()
    })
  },
  { name: 'http-metrics' },
)
