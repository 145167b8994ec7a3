// The steps every /v1 operation takes before its handler, composed once per route when the route
// is added: its constant headers (no-store, D13; the deprecation notice, D7), the API key (D2,
// D3), the rate limit (D12) and, for a deprecated operation, its sunset (D7). A step is there
// only when its concern applies to the route and is on: no rate-limit step at a quota of 0, no
// sunset step on an operation that is not deprecated. Each step is one route-level onRequest
// hook, in that order, after the app's own (security headers and X-Request-Id,
// plugins/security.ts).
import type { onRequestAsyncHookHandler, onRequestHookHandler, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import type { Clock } from '../../clock.ts'
import type { KeyVerifier } from '../../keys/verifier.ts'
import { setReplyHeaders } from '../internals.ts'
import { type AuthFailureOptions, authenticate } from './auth.ts'
import { deprecationHeaders, sunsetCheck } from './deprecation.ts'

export interface OperationsOptions {
  verifier: KeyVerifier
  /** D3: the failed-authentication limit, or undefined when it is off. */
  authFailures: AuthFailureOptions | undefined
  clock: Clock
  /** The rate limit's check (plugins/rate-limit.ts), or undefined when it is off. */
  rateLimit: onRequestAsyncHookHandler | undefined
}

type Step = onRequestHookHandler | onRequestAsyncHookHandler

/**
 * The headers every answer of the route carries, whatever its status: 401s, 410s and 429s
 * included. `Cache-Control: no-store` because answers depend on the key, so no shared cache may
 * keep them (D13, OWASP's REST Security Cheat Sheet); the deprecation notice on a deprecated
 * operation (D7). One frozen object per route, copied in at once (internals.ts).
 */
function constantHeaders(route: RouteOptions): Readonly<Record<string, string>> {
  const deprecation = route.config?.deprecation
  return Object.freeze({
    'cache-control': 'no-store',
    ...(deprecation === undefined ? {} : deprecationHeaders(deprecation)),
  })
}

function stepsOf(route: RouteOptions, options: OperationsOptions): Step[] {
  const headers = constantHeaders(route)
  const steps: Step[] = [
    function operationHeaders(_request, reply, done) {
      setReplyHeaders(reply, headers)
      done()
    },
    authenticate(options.verifier, options.authFailures),
  ]
  if (options.rateLimit !== undefined) steps.push(options.rateLimit)
  const deprecation = route.config?.deprecation
  if (deprecation !== undefined) steps.push(sunsetCheck(deprecation, route.url, options.clock))
  return steps
}

/** Register in the /v1 scope before its routes: it composes each route's steps as it is added. */
export const operations = fp<OperationsOptions>(async (api, options) => {
  api.decorateRequest('apiKeyId', '')
  api.addHook('onRoute', (route) => {
    const existing = route.onRequest === undefined ? [] : [route.onRequest].flat()
    route.onRequest = [...existing, ...stepsOf(route, options)]
  })
})
