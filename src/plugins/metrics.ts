// D17: every request the app answers is timed into http_server_request_duration_seconds, with
// OTel's labels: the method (unknown ones as `_OTHER`), the route *template* (never the path, so
// a scanner cannot add label values: a path no route matches is the empty route) and the status.
import fp from 'fastify-plugin'
import type { Metrics } from '../metrics.ts'

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

export const httpMetrics = fp<{ metrics: Metrics }>(
  async (app, { metrics }) => {
    const templates = new Map<string, string>()
    app.addHook('onResponse', (request, reply, done) => {
      const url = request.routeOptions.url
      let route = url === undefined ? '' : templates.get(url)
      if (route === undefined) {
        route = routeTemplate(url)
        templates.set(url as string, route)
      }
      const method = KNOWN_METHODS.has(request.method) ? request.method : '_OTHER'
      metrics.request(method, route, reply.statusCode, reply.elapsedTime / 1000)
      // D14: the route marks a replay with this header; counted here, with the rest of the answer.
      if (reply.getHeader('idempotent-replayed') === 'true') metrics.replayed()
      done()
    })
  },
  { name: 'http-metrics' },
)
