// D8: every response carries X-Request-Id (set with the security headers, plugins/security.ts),
// the same id the logs carry for the request.
import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'

const WELL_FORMED = /^[A-Za-z0-9._:-]{1,128}$/

/** Fastify's genReqId: a well-formed client id is echoed, anything else replaced. */
export function requestId(request: IncomingMessage): string {
  const given = request.headers['x-request-id']
  return typeof given === 'string' && WELL_FORMED.test(given) ? given : randomUUID()
}
