// Bodies that are the same for every request until the next build (the OpenAPI document, the
// /docs page's files) carry a strong ETag, and a request whose If-None-Match names it gets a 304
// without a body (RFC 9110 §13.1.2, §15.4.5), so browsers and tools keep what they have.
import { createHash } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { CONTENT_CODINGS, codedEtag } from './plugins/compression.ts'

/**
 * The document changes only with the code, so a client revalidates (`no-cache`) and gets a 304
 * while its copy is current, rather than keeping it for a set time (D26).
 */
export const DOCUMENT_CACHE_CONTROL = 'no-cache'

/** A strong entity tag of these bytes: their SHA-256, base64url, in quotes. */
export function strongEtag(body: string | Buffer): string {
  return `"${createHash('sha256').update(body).digest('base64url')}"`
}

/** Every tag the client may hold for a body: the identity one and one per content coding. */
export function etagsOf(etag: string): string[] {
  return [etag, ...CONTENT_CODINGS.map((coding) => codedEtag(etag, coding))]
}

/**
 * The tag of `current` that If-None-Match names, or undefined. Weak comparison (§13.1.2):
 * `W/"x"` matches `"x"`; `*` matches whatever exists.
 */
export function matchingEtag(
  ifNoneMatch: string | string[] | undefined,
  current: readonly string[],
): string | undefined {
  if (ifNoneMatch === undefined) return undefined
  const header = [ifNoneMatch].flat().join(',')
  if (header.trim() === '*') return current[0]
  for (const [, tag] of header.matchAll(/(?:W\/)?("[^"]*")/g)) {
    if (tag !== undefined && current.includes(tag)) return tag
  }
  return undefined
}

/** A body fixed for the build: its bytes and strong ETag, computed once. */
export interface FixedBody {
  body: string
  etag: string
}

export function fixedBody(body: string): FixedBody {
  return { body, etag: strongEtag(body) }
}

/**
 * Answers with `fixed`, or a 304 when the client holds it. `cacheControl` says how long it may
 * keep it without asking; the answer varies with Accept-Encoding (the plugin compresses it).
 */
export function sendFixedBody(
  request: FastifyRequest,
  reply: FastifyReply,
  fixed: FixedBody,
  contentType: string,
  cacheControl: string,
): FastifyReply {
  reply.header('cache-control', cacheControl).header('vary', 'accept-encoding')
  const held = matchingEtag(request.headers['if-none-match'], etagsOf(fixed.etag))
  if (held !== undefined) return reply.code(304).header('etag', held).send()
  return reply.header('etag', fixed.etag).type(contentType).send(fixed.body)
}
