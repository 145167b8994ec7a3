// The client's readers of Link (RFC 8288), RateLimit (draft-10) and Retry-After (RFC 9110),
// its backoff, and its generated types kept in step with the contract (D18).
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { test } from 'node:test'
import { GET_PET_SUNSET } from '../../client/src/contract.ts'
import { PetstoreError, type PetstoreErrorCode } from '../../client/src/errors.ts'
import { parseRateLimit, parseRetryAfter } from '../../client/src/headers.ts'
import { nextLink, parseLinkHeader } from '../../client/src/link.ts'
import { backoffDelayMs, isRetryable, type RetryPolicy } from '../../client/src/retry.ts'
import { GET_PET_SUNSET_AT } from '../../src/contract/limits.ts'

test('Link: the next link among others, resolved against the response address', () => {
  const context = new URL('https://petstore.example.com/v1/pets?limit=5')
  const field =
    '</docs>; rel="deprecation"; type="text/html", </v1/pets?limit=5&cursor=a,b;c>; title="x, y; z"; REL="Next Last"'
  assert.deepEqual(parseLinkHeader(field), [
    { target: '/docs', rels: ['deprecation'] },
    { target: '/v1/pets?limit=5&cursor=a,b;c', rels: ['next', 'last'] },
  ])
  assert.equal(
    nextLink(field, context)?.href,
    'https://petstore.example.com/v1/pets?limit=5&cursor=a,b;c',
  )
  assert.equal(
    nextLink('<pets?cursor=2>;rel=next', context)?.href,
    'https://petstore.example.com/v1/pets?cursor=2',
  )
  assert.equal(nextLink('<https://other.example/x>; rel="prev"', context), undefined)
  assert.equal(nextLink(null, context), undefined)
  // Only the first rel counts (RFC 8288 §3.3); a malformed member is skipped.
  assert.equal(nextLink('<a>; rel="prev"; rel="next"', context), undefined)
  assert.equal(nextLink('garbage; rel=next, <b>; rel=next', context)?.pathname, '/v1/b')
})

test('RateLimit: remaining and reset of the first policy', () => {
  assert.deepEqual(parseRateLimit('"default";r=12;t=30'), { remaining: 12, reset: 30 })
  assert.deepEqual(parseRateLimit('"a;b,c";r=0;t=5, "other";r=1;t=1'), { remaining: 0, reset: 5 })
  assert.equal(parseRateLimit('"default";r=;t=30'), undefined)
  assert.equal(parseRateLimit(null), undefined)
})

test('Retry-After: seconds or an HTTP-date', () => {
  const now = Date.UTC(2027, 0, 1, 0, 0, 0)
  assert.equal(parseRetryAfter('7', now), 7)
  assert.equal(parseRetryAfter('Fri, 01 Jan 2027 00:00:30 GMT', now), 30)
  assert.equal(parseRetryAfter('Thu, 31 Dec 2026 00:00:00 GMT', now), 0)
  assert.equal(parseRetryAfter('soon', now), undefined)
  assert.equal(parseRetryAfter(null, now), undefined)
})

test('backoff: full jitter under a doubling ceiling, at least Retry-After, never over the cap', () => {
  const policy = (random: number): RetryPolicy => ({
    maxRetries: 5,
    baseDelayMs: 500,
    maxDelayMs: 30_000,
    random: () => random,
  })
  assert.equal(backoffDelayMs(policy(0.5), 0, undefined), 250)
  assert.equal(backoffDelayMs(policy(0.5), 3, undefined), 2_000)
  assert.equal(backoffDelayMs(policy(0.999), 10, undefined), 29_970)
  assert.equal(backoffDelayMs(policy(0), 0, undefined), 0)
  assert.equal(backoffDelayMs(policy(0.5), 0, 3), 3_000)
  assert.equal(backoffDelayMs(policy(0.9), 6, 3), 27_000)
  assert.equal(backoffDelayMs(policy(0.5), 0, 30), 30_000)
  assert.equal(backoffDelayMs(policy(0.5), 0, 31), undefined)
})

test('retried: no answer, timeouts, 429, 503 and 409 idempotency_key_in_use; nothing else', () => {
  const error = (status: number, code: PetstoreErrorCode) =>
    new PetstoreError({ status, code, message: code })
  const retried: [number, PetstoreErrorCode][] = [
    [0, 'network_error'],
    [0, 'timeout'],
    [429, 'rate_limited'],
    [503, 'unavailable'],
    [503, 'invalid_response'],
    [409, 'idempotency_key_in_use'],
  ]
  for (const [status, code] of retried) assert.ok(isRetryable(error(status, code)), code)
  const final: [number, PetstoreErrorCode][] = [
    [400, 'invalid_request'],
    [401, 'unauthorized'],
    [404, 'not_found'],
    [422, 'idempotency_key_reused'],
    [500, 'internal_error'],
    [502, 'invalid_response'],
    [200, 'invalid_response'],
  ]
  for (const [status, code] of final) assert.ok(!isRetryable(error(status, code)), code)
})

test("get's @deprecated note and GET_PET_SUNSET give the contract's sunset", async () => {
  assert.equal(GET_PET_SUNSET, GET_PET_SUNSET_AT.toISOString())
  const source = await readFile(new URL('../../client/src/petstore.ts', import.meta.url), 'utf8')
  const note = /@deprecated[\s\S]*?\*\//.exec(source)?.[0] ?? ''
  assert.ok(note.includes(GET_PET_SUNSET_AT.toUTCString()), note)
})
