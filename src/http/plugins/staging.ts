// D29: what a staging deployment adds so that client developers can rehearse failures. Registered
// only with PETSTORE_ENV=staging (app.ts): in production none of this exists, so `Prefer` is
// ignored there by construction, and no request pays for it.
//
// A request may carry `Prefer: code=<status>` and `delay=<ms>` (RFC 7240, Prism's spelling). The
// step runs after the operation's own (auth, the rate limit, the sunset; plugins/operations.ts),
// so a rehearsal is never a way around them, and before the body is read and the store is asked:
// a rehearsed error touches nothing. Without a `Prefer` it honours, a request may meet a random
// fault (PETSTORE_STAGING_FAULTS, staging/faults.ts), marked in `Petstore-Staging-Fault`.

import { setTimeout as sleep } from 'node:timers/promises'
import type { onRequestAsyncHookHandler, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import type { Clock } from '../../clock.ts'
import { PREFER_DELAY_MAX_MS } from '../../contract/limits.ts'
import { ApiError, codeForStatus, type ErrorCode, errorCatalog } from '../../errors.ts'
import type { StagingObserver } from '../../observability/metrics.ts'
import { drawFault, type StagingFaults } from '../../staging/faults.ts'
import { readPreferences } from '../../staging/prefer.ts'
import { INVALID_TOKEN } from './auth.ts'
import { secondsToWindowEnd } from './rate-limit.ts'

declare module 'fastify' {
  interface FastifyRequest {
    /** D29: what staging did to this request, for its log line; unset elsewhere. */
    staging?: string
  }
}

export interface StagingOptions {
  /** PETSTORE_STAGING_FAULTS; undefined: no random faults. */
  faults: StagingFaults | undefined
  clock: Clock
  /** The rate limit's window (plugins/rate-limit.ts): a rehearsed 429's Retry-After ends it. */
  rateLimitWindowSeconds: number
  /** Numbers in [0, 1) for the faults' draws; Math.random unless a test gives its own. */
  random?: () => number
  observer?: StagingObserver
}

/** A random fault's mark on its answer; a rehearsal is said in RFC 7240's own field. */
const FAULT_HEADER = 'petstore-staging-fault'
const APPLIED_HEADER = 'preference-applied'

/** What a request asked for with `Prefer`, once checked against its operation. */
interface Rehearsal {
  status: number | undefined
  delayMs: number | undefined
}

/** The statuses an operation documents (its schema's responses), as the 400 lists them. */
function documentedStatuses(route: RouteOptions): number[] {
  const responses = route.schema?.response
  if (typeof responses !== 'object' || responses === null) return []
  return Object.keys(responses)
    .map(Number)
    .filter((status) => Number.isInteger(status))
    .sort((a, b) => a - b)
}

/** D16: a value quoted back in a 400 is cut short, so a client's 16 KiB field is not echoed. */
const SHOWN_LENGTH = 40

function shown(value: string): string {
  return JSON.stringify(value.length > SHOWN_LENGTH ? `${value.slice(0, SHOWN_LENGTH)}…` : value)
}

function rehearsalOf(field: string | undefined, statuses: readonly number[]): Rehearsal {
  const none: Rehearsal = { status: undefined, delayMs: undefined }
  if (field === undefined) return none
  const preferences = readPreferences(field)
  const code = preferences.get('code')
  const delay = preferences.get('delay')
  if (code !== undefined && !statuses.some((status) => String(status) === code)) {
    throw new ApiError(
      'invalid_request',
      `header Prefer: code must be a status this operation documents: ${statuses.join(', ')} (got ${shown(code)})`,
    )
  }
  if (delay !== undefined && (!/^\d{1,5}$/.test(delay) || Number(delay) > PREFER_DELAY_MAX_MS)) {
    throw new ApiError(
      'invalid_request',
      `header Prefer: delay must be whole milliseconds from 0 to ${PREFER_DELAY_MAX_MS} (got ${shown(delay)})`,
    )
  }
  return {
    status: code === undefined ? undefined : Number(code),
    delayMs: delay === undefined ? undefined : Number(delay),
  }
}

/**
 * The error a status is answered with, its headers as the real one has them: a 401's challenge
 * (and no budget fields: auth comes before the rate limit, D2), a 429's Retry-After to the end of
 * the window with what is left of the budget, 0; a 409's and a 503's Retry-After of 1 s.
 */
function rehearsedError(
  status: number,
  how: string,
  reply: Parameters<onRequestAsyncHookHandler>[1],
  options: StagingOptions,
): ApiError {
  const code: ErrorCode = codeForStatus(status)
  const message = `${how}: ${errorCatalog[code].summary}`
  switch (code) {
    case 'unauthorized':
      reply.removeHeader('ratelimit').removeHeader('ratelimit-policy')
      return new ApiError(code, message, { 'www-authenticate': INVALID_TOKEN })
    case 'rate_limited': {
      const seconds = secondsToWindowEnd(options.clock.now(), options.rateLimitWindowSeconds)
      const headers: Record<string, string> = { 'retry-after': String(seconds) }
      if (reply.hasHeader('ratelimit-policy')) headers.ratelimit = `"default";r=0;t=${seconds}`
      return new ApiError(code, message, headers)
    }
    case 'idempotency_key_in_use':
    case 'unavailable':
      return new ApiError(code, message, { 'retry-after': '1' })
    default:
      return new ApiError(code, message)
  }
}

/** `code=503, delay=200`, either part left out when undefined, as Prefer spells them. */
function preferences(status: number | undefined, delayMs: number | undefined): string {
  const parts = [
    ...(status === undefined ? [] : [`code=${status}`]),
    ...(delayMs === undefined ? [] : [`delay=${delayMs}`]),
  ]
  return parts.join(', ')
}

function stagingStep(route: RouteOptions, options: StagingOptions): onRequestAsyncHookHandler {
  const statuses = documentedStatuses(route)
  const random = options.random ?? Math.random
  const { faults, observer } = options
  return async function staging(request, reply) {
    // Node joins a field sent on several lines with ", ", which is Prefer's own list syntax.
    const field = request.headers.prefer
    const asked = rehearsalOf(Array.isArray(field) ? field.join(', ') : field, statuses)
    if (asked.status !== undefined || asked.delayMs !== undefined) {
      await rehearse(asked, request, reply)
      return
    }
    if (faults === undefined) return
    const fault = drawFault(faults, random)
    const marks = preferences(fault.status, fault.delayMs)
    if (marks === '') return
    reply.header(FAULT_HEADER, marks)
    request.staging = `fault ${marks}`
    if (fault.delayMs !== undefined) {
      observer?.answered('fault', 'delay')
      await sleep(fault.delayMs)
    }
    if (fault.status !== undefined) {
      observer?.answered('fault', String(fault.status))
      throw rehearsedError(
        fault.status,
        `a fault injected (PETSTORE_STAGING_FAULTS)`,
        reply,
        options,
      )
    }
  }

  async function rehearse(
    asked: Rehearsal,
    request: Parameters<onRequestAsyncHookHandler>[0],
    reply: Parameters<onRequestAsyncHookHandler>[1],
  ): Promise<void> {
    const { status, delayMs } = asked
    const error = status !== undefined && status >= 400
    // A success status is said applied only once its answer comes (onSend below).
    const applied = preferences(error ? status : undefined, delayMs)
    if (applied !== '') reply.header(APPLIED_HEADER, applied)
    request.staging = `Prefer ${preferences(status, delayMs)}`
    if (delayMs !== undefined) {
      observer?.answered('prefer', 'delay')
      await sleep(delayMs)
    }
    if (status === undefined) return
    observer?.answered('prefer', String(status))
    // The operation's success status: served for real, and said applied only if it comes.
    if (!error) {
      successWanted.set(request, status)
      return
    }
    throw rehearsedError(status, `rehearsed with Prefer: code=${status}`, reply, options)
  }
}

/** Requests that asked for their operation's success status, with it (see onSend below). */
const successWanted = new WeakMap<object, number>()

/** Register in the /v1 scope after plugins/operations.ts and before the routes. */
export const staging = fp<StagingOptions>(async (api, options) => {
  api.addHook('onRoute', (route) => {
    const existing = route.onRequest === undefined ? [] : [route.onRequest].flat()
    route.onRequest = [...existing, stagingStep(route, options)]
  })
  api.addHook('onSend', async (request, reply, payload) => {
    const wanted = successWanted.get(request)
    if (wanted !== undefined && reply.statusCode === wanted) {
      const delay = reply.getHeader(APPLIED_HEADER)
      reply.header(
        APPLIED_HEADER,
        delay === undefined ? `code=${wanted}` : `code=${wanted}, ${delay}`,
      )
    }
    return payload
  })
})
