// Small helpers shared by the black-box HTTP tests of the pet operations. They speak HTTP
// only: nothing here reads the store or imports the service's code.
import assert from 'node:assert/strict'
import type { TestServer } from '../helpers/server.ts'

export type PetStatus = 'available' | 'pending' | 'sold'

export interface Pet {
  id: number
  name: string
  categoryId: number
  status?: PetStatus
}

export const STATUSES: readonly PetStatus[] = ['available', 'pending', 'sold']

/** 2^53 − 1, the largest id and categoryId the service accepts. */
export const MAX_ID = 9007199254740991

export interface LinkValue {
  target: string
  params: Record<string, string>
}

/** Parses an RFC 8288 Link field value: `<target>; name="value"; …, <target>; …`. */
export function parseLinks(header: string | null): LinkValue[] {
  if (header === null) return []
  const links: LinkValue[] = []
  const linkPattern = /<([^>]*)>((?:\s*;\s*[^;,=\s]+\s*=\s*(?:"[^"]*"|[^;,\s]*))*)/g
  for (const match of header.matchAll(linkPattern)) {
    const params: Record<string, string> = {}
    for (const param of (match[2] ?? '').matchAll(
      /;\s*([^;,=\s]+)\s*=\s*(?:"([^"]*)"|([^;,\s]*))/g,
    )) {
      params[(param[1] ?? '').toLowerCase()] = param[2] ?? param[3] ?? ''
    }
    links.push({ target: match[1] ?? '', params })
  }
  return links
}

/** The target of the `rel="next"` link of a response, if it has one. */
export function nextLink(response: Response): string | undefined {
  const next = parseLinks(response.headers.get('link')).filter((l) => l.params.rel === 'next')
  assert.ok(next.length <= 1, 'at most one rel="next" link')
  return next[0]?.target
}

/** GETs a listPets URL and returns the page, asserting a 200 with a bare JSON array. */
export async function getPage(
  server: TestServer,
  path: string,
): Promise<{ pets: Pet[]; next: string | undefined; response: Response }> {
  const response = await server.request(path)
  assert.equal(response.status, 200, `GET ${path}`)
  assert.match(response.headers.get('content-type') ?? '', /^application\/json/)
  const pets = (await response.json()) as Pet[]
  assert.ok(Array.isArray(pets), 'the body is a bare JSON array')
  return { pets, next: nextLink(response), response }
}

/**
 * Walks listPets from `path` by following `Link: rel="next"` to the end; returns every page.
 * Stops with a failure rather than looping forever.
 */
export async function walkPages(
  server: TestServer,
  path: string,
  maxPages = 1000,
): Promise<Pet[][]> {
  const pages: Pet[][] = []
  let url: string | undefined = path
  while (url !== undefined) {
    assert.ok(pages.length < maxPages, `more than ${maxPages} pages from ${path}`)
    const page = await getPage(server, url)
    pages.push(page.pets)
    url = page.next
  }
  return pages
}

/** Every pet in the store, in the order listPets returns them (walking pages of 100). */
export async function listAll(server: TestServer, status?: PetStatus): Promise<Pet[]> {
  const query = new URLSearchParams({ limit: '100' })
  if (status !== undefined) query.set('status', status)
  return (await walkPages(server, `/v1/pets?${query}`)).flat()
}

/**
 * POSTs a body as the exact text given (no JSON.stringify), with the given Content-Type;
 * `null` sends none (with a string body fetch would add text/plain, so pass bytes then).
 */
export function postRaw(
  server: TestServer,
  raw: string | Uint8Array,
  contentType: string | null = 'application/json',
): Promise<Response> {
  const headers = new Headers()
  if (contentType !== null) headers.set('content-type', contentType)
  return server.request('/v1/pets', { method: 'POST', headers, body: raw })
}

/** The number of Unicode code points in a string (what the name limit counts). */
export function codePoints(text: string): number {
  return [...text].length
}
