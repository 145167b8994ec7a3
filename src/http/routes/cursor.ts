// D5: the listPets cursor. Opaque to clients (they follow the `Link: rel="next"` URL); inside,
// the id after which the next page starts, so a page costs the same wherever it is in the table.
import { MAX_ID } from '../../contract/limits.ts'
import type { PetStatus } from '../../contract/schemas.ts'
import { ApiError } from '../../errors.ts'

export function encodeCursor(afterId: number): string {
  return Buffer.from(JSON.stringify({ after: afterId })).toString('base64url')
}

export function decodeCursor(cursor: string): number {
  let after: unknown
  try {
    after = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')).after
  } catch {
    after = undefined
  }
  if (!Number.isSafeInteger(after) || (after as number) < 0 || (after as number) > MAX_ID) {
    throw new ApiError(
      'invalid_request',
      'query parameter cursor is not valid; use the URL of a Link: rel="next" header as it is',
    )
  }
  return after as number
}

/** The RFC 8288 `Link` value for the page after `lastId`, keeping `limit` and `status`. */
export function nextPageLink(
  path: string,
  limit: number,
  status: PetStatus | undefined,
  lastId: number,
): string {
  // Written out rather than with URLSearchParams, which cost a list request several µs of CPU
  // (docs/benchmarks.md, "Measurements behind choices in the code"): no part needs escaping,
  // the limit being digits, the status a word and the cursor base64url.
  const filter = status === undefined ? '' : `&status=${status}`
  return `<${path}?limit=${limit}${filter}&cursor=${encodeCursor(lastId)}>; rel="next"`
}
