// D7: a deprecated operation announces itself on every response, 401s included, and answers
// 410 once its sunset has passed. A route opts in with `config: { deprecation }`.
import fp from 'fastify-plugin'
import type { Clock } from '../clock.ts'
import { ApiError } from '../errors.ts'

export interface Deprecation {
  deprecatedAt: Date
  sunsetAt: Date
  /** Where the deprecation is explained (rel="deprecation", rel="sunset"). */
  docs: string
  /** What to use instead (rel="successor-version"). */
  successor: string
}

declare module 'fastify' {
  interface FastifyContextConfig {
    deprecation?: Deprecation
  }
}

export function deprecationHeaders({ deprecatedAt, sunsetAt, docs, successor }: Deprecation) {
  return {
    // RFC 9745: a structured-field date, seconds since the epoch.
    deprecation: `@${Math.floor(deprecatedAt.getTime() / 1000)}`,
    // RFC 8594: an IMF-fixdate, e.g. Thu, 05 Dec 2030 00:00:00 GMT.
    sunset: sunsetAt.toUTCString(),
    link: `<${docs}>; rel="deprecation"; type="text/html", <${docs}>; rel="sunset"; type="text/html", <${successor}>; rel="successor-version"`,
  }
}

/** Registered before auth, so that even a 401 from a deprecated operation announces it. */
export const deprecation = fp<{ clock: Clock }>(async (app, { clock }) => {
  const headersFor = new WeakMap<Deprecation, ReturnType<typeof deprecationHeaders>>()
  app.addHook('onRoute', (route) => {
    const config = route.config?.deprecation
    if (config !== undefined) headersFor.set(config, deprecationHeaders(config))
  })

  app.addHook('onRequest', async (request, reply) => {
    const config = request.routeOptions.config.deprecation
    if (config !== undefined) reply.headers(headersFor.get(config) ?? deprecationHeaders(config))
  })

  // After auth (preValidation runs after every onRequest hook), before validation.
  app.addHook('preValidation', async (request) => {
    const config = request.routeOptions.config.deprecation
    if (config !== undefined && clock.now() >= config.sunsetAt.getTime()) {
      throw new ApiError(
        'gone',
        `${request.method} ${request.routeOptions.url} was removed on ${config.sunsetAt.toUTCString()}; use ${config.successor}`,
      )
    }
  })
})
