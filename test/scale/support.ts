// Helpers for the scale tests: HTTP against service processes, bounded concurrency, and
// walking listPets by its Link cursor. They speak HTTP only.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { parseLinks } from '../http/support.ts'

export interface Pet {
  id: number
  name: string
  categoryId: number
  status?: 'available' | 'pending' | 'sold'
}

/** An opaque PETSTORE_API_KEYS key shared by every instance (32+ characters). */
export function sharedKey(): string {
  return `scale-test-${randomBytes(24).toString('hex')}`
}

/** No request may take longer than this: the store's timeouts must answer well before it. */
export const REQUEST_DEADLINE_MS = 15_000

export function call(baseUrl: string, key: string, path: string, init: RequestInit = {}) {
  const headers = new Headers(init.headers)
  headers.set('authorization', `Bearer ${key}`)
  if (init.body !== undefined) headers.set('content-type', 'application/json')
  return fetch(baseUrl + path, {
    ...init,
    headers,
    signal: AbortSignal.timeout(REQUEST_DEADLINE_MS),
  })
}

/**
 * Runs `task(0)`, …, `task(count - 1)` with at most `concurrency` running at once; resolves
 * with their results in order and the largest number that were in flight together.
 */
export async function boundedPool<T>(
  count: number,
  concurrency: number,
  task: (index: number) => Promise<T>,
): Promise<{ results: T[]; maxInFlight: number }> {
  const results: T[] = new Array(count)
  let next = 0
  let inFlight = 0
  let maxInFlight = 0
  const worker = async () => {
    while (next < count) {
      const index = next++
      inFlight++
      maxInFlight = Math.max(maxInFlight, inFlight)
      try {
        results[index] = await task(index)
      } finally {
        inFlight--
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker))
  return { results, maxInFlight }
}

/**
 * Walks listPets from `firstPath`, following `Link: rel="next"`; page n is fetched from
 * `baseUrls[n % baseUrls.length]`, so a cursor one instance made is used on the others.
 */
export async function walk(baseUrls: string[], key: string, firstPath: string): Promise<Pet[]> {
  const pets: Pet[] = []
  let path: string | undefined = firstPath
  for (let page = 0; path !== undefined; page++) {
    assert.ok(page < 10_000, 'the cursor walk does not end')
    const response = await call(baseUrls[page % baseUrls.length] as string, key, path)
    assert.equal(response.status, 200, `GET ${path}`)
    pets.push(...((await response.json()) as Pet[]))
    path = parseLinks(response.headers.get('link')).find((l) => l.params.rel === 'next')?.target
  }
  return pets
}
