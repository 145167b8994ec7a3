// D7: a deprecated operation announces itself on every response, 401s included, and answers
// 410 once its sunset has passed. A route opts in with `config: { deprecation }`; the
// operations' steps (plugins/operations.ts) send its headers and add the sunset check.
import type { onRequestHookHandler } from 'fastify'
import type { Clock } from '../../clock.ts'
import { ApiError } from '../../errors.ts'

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

/**
 * The 410 once the sunset has passed: after auth (a client without a valid key learns nothing
 * about the operation but its headers), before validation.
 */
export function sunsetCheck(
  deprecation: Deprecation,
  url: string,
  clock: Clock,
): onRequestHookHandler {
  const { sunsetAt, successor } = deprecation
  const removed = `${url} was removed on ${sunsetAt.toUTCString()}; use ${successor}`
  return function sunset(request, _reply, done) {
    if (clock.now() < sunsetAt.getTime()) done()
    else done(new ApiError('gone', `${request.method} ${removed}`))
  }
}
