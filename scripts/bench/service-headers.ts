// The response headers the service sends on its operations, from the service's own definitions,
// for the references that send the same bytes (same-bytes.ts, fastify-floor.ts). The harness
// checks every name and value against the service's answers on each run (run.ts).
import { deprecationHeaders } from '../../src/http/plugins/deprecation.ts'
import { securityHeaders } from '../../src/http/plugins/security.ts'
import { getPetDeprecation } from '../../src/http/routes/pets.ts'

/**
 * Every operation's answer: D13's security headers, `Cache-Control: no-store` (set by app.ts on
 * every operation: answers depend on the key) and the JSON content type of the routes.
 */
export const OPERATION_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  ...securityHeaders(),
  'cache-control': 'no-store',
  'content-type': 'application/json; charset=utf-8',
})

/** getPet's answer: the operation headers and its deprecation notice (D7). */
export const GET_PET_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  ...OPERATION_HEADERS,
  ...deprecationHeaders(getPetDeprecation),
})
