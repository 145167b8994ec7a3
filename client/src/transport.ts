// One call to the service: attempts, each with its own timeout, retried by the policy; the
// answer's JSON, or a PetstoreError.
import { PetstoreError } from './errors.ts'
import { parseRateLimit, parseRetryAfter } from './headers.ts'
import { backoffDelayMs, isRetryable, type RetryPolicy, type Sleep } from './retry.ts'

/** The `fetch` the client calls; the platform's unless one is given. */
export type Fetch = (url: string, init: RequestInit) => Promise<Response>

export interface Transport {
  apiKey: string
  fetch: Fetch
  /** Per attempt, from sending the request to the end of the answer's body. */
  timeoutMs: number
  userAgent: string | undefined
  retry: RetryPolicy
  sleep: Sleep
}

export interface Call {
  method: 'GET' | 'POST'
  url: URL
  body?: unknown
  headers?: Record<string, string>
  signal?: AbortSignal | undefined
}

/** A 2xx answer. */
export interface Answer {
  status: number
  headers: Headers
  /** The parsed JSON body. */
  body: unknown
  /** Where the request went: the context of the answer's links. */
  url: URL
}

/** What one attempt gave: an answer whose body was read in full, or why none came. */
type Attempt =
  | { status: number; headers: Headers; text: string }
  | { failed: 'network_error' | 'timeout'; cause: unknown }

export async function send(transport: Transport, call: Call): Promise<Answer> {
  for (let retry = 0; ; retry++) {
    call.signal?.throwIfAborted()
    const attempt = await attemptOnce(transport, call)
    const result = outcome(call, attempt)
    if (!(result instanceof PetstoreError)) return result
    if (retry >= transport.retry.maxRetries || !isRetryable(result)) throw result
    const delay = backoffDelayMs(transport.retry, retry, result.retryAfter)
    if (delay === undefined) throw result
    await transport.sleep(delay, call.signal)
  }
}

function requestHeaders(transport: Transport, call: Call): Record<string, string> {
  const headers: Record<string, string> = {
    accept: 'application/json',
    authorization: `Bearer ${transport.apiKey}`,
    ...call.headers,
  }
  if (call.body !== undefined) headers['content-type'] = 'application/json'
  // Browsers do not let a page set User-Agent, so it is sent only when asked for.
  if (transport.userAgent !== undefined) headers['user-agent'] = transport.userAgent
  return headers
}

/**
 * One attempt under its own AbortController, which the timeout and the caller's signal both
 * abort (no AbortSignal.any, which Node 20 has only from 20.3). The caller's abort is thrown
 * as it is (an AbortError unless the caller gave another reason), never retried.
 */
async function attemptOnce(transport: Transport, call: Call): Promise<Attempt> {
  const controller = new AbortController()
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    controller.abort()
  }, transport.timeoutMs)
  const onAbort = () => controller.abort(call.signal?.reason)
  call.signal?.addEventListener('abort', onAbort, { once: true })
  try {
    const init: RequestInit = {
      method: call.method,
      headers: requestHeaders(transport, call),
      signal: controller.signal,
    }
    if (call.body !== undefined) init.body = JSON.stringify(call.body)
    const response = await transport.fetch(call.url.href, init)
    const text = await response.text()
    return { status: response.status, headers: response.headers, text }
  } catch (cause) {
    if (call.signal?.aborted) throw call.signal.reason
    return { failed: timedOut ? 'timeout' : 'network_error', cause }
  } finally {
    clearTimeout(timer)
    call.signal?.removeEventListener('abort', onAbort)
  }
}

/** The attempt as the caller's answer, or as the error it is. */
function outcome(call: Call, attempt: Attempt): Answer | PetstoreError {
  const where = `${call.method} ${call.url.origin}${call.url.pathname}`
  if ('failed' in attempt) {
    const what = attempt.failed === 'timeout' ? 'timed out' : 'failed: no answer came'
    const reason = attempt.cause instanceof Error ? ` (${describe(attempt.cause)})` : ''
    return new PetstoreError({
      status: 0,
      code: attempt.failed,
      message: `${where} ${what}${reason}`,
      cause: attempt.cause,
    })
  }
  const { status, headers, text } = attempt
  const requestId = headers.get('x-request-id') ?? undefined
  const body = parseJson(text)
  if (status >= 200 && status < 300) {
    if (body === undefined) {
      return invalidResponse(where, status, headers, requestId, 'a body that is not JSON')
    }
    return { status, headers, body: body.value, url: call.url }
  }
  const details = {
    status,
    requestId,
    retryAfter: parseRetryAfter(headers.get('retry-after'), Date.now()),
    rateLimit: parseRateLimit(headers.get('ratelimit')),
  }
  if (!isErrorBody(body?.value)) {
    const what = "a body that is not the service's JSON error; a proxy or gateway may have answered"
    return invalidResponse(where, status, headers, requestId, what, details)
  }
  return new PetstoreError({ ...details, code: body.value.code, message: body.value.message })
}

function invalidResponse(
  where: string,
  status: number,
  headers: Headers,
  requestId: string | undefined,
  what: string,
  details: object = {},
): PetstoreError {
  const type = headers.get('content-type') ?? 'no content type'
  return new PetstoreError({
    ...details,
    status,
    requestId,
    code: 'invalid_response',
    message: `${where} answered HTTP ${status} with ${what} (${type})`,
  })
}

function parseJson(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) }
  } catch {
    return undefined
  }
}

function isErrorBody(value: unknown): value is { code: PetstoreError['code']; message: string } {
  if (typeof value !== 'object' || value === null) return false
  const { code, message } = value as Record<string, unknown>
  return typeof code === 'string' && typeof message === 'string'
}

/** An error's message with its cause's (fetch's TypeError says only "fetch failed"). */
function describe(error: Error): string {
  return error.cause instanceof Error ? `${error.message}: ${error.cause.message}` : error.message
}
