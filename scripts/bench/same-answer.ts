// How the benchmark checks that a reference answers as the service does before it is measured
// (run.ts's SQLite references, postgres.ts's PostgreSQL one): one request as wrk sends it, and a
// comparison of status, body and headers.
import { request as httpRequest } from 'node:http'
import type { Request } from './load.ts'

export interface Answer {
  status: number
  body: string
  headers: Headers
}

/** Checks get a new Idempotency-Key each, never a replay. */
let checkKeys = 0

/**
 * One request with the headers wrk sends (node:http: fetch would add an Accept-Encoding, and get
 * a compressed answer with other headers than wrk's).
 */
export function fetchAnswer(key: string, url: string, request: Request): Promise<Answer> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${key}`,
    ...(request.method === 'POST' ? { 'content-type': 'application/json' } : {}),
    ...(request.idempotencyKey
      ? { 'idempotency-key': `check-${process.pid}-${Date.now()}-${++checkKeys}` }
      : {}),
    ...request.headers,
  }
  return new Promise((resolve, reject) => {
    httpRequest(url + request.path, { method: request.method, headers }, (response) => {
      let body = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => {
        body += chunk
      })
      response.on('end', () => {
        const received = new Headers()
        for (const [name, value] of Object.entries(response.headers)) {
          if (value !== undefined)
            received.set(name, Array.isArray(value) ? value.join(', ') : value)
        }
        resolve({ status: response.statusCode ?? 0, body, headers: received })
      })
    })
      .on('error', reject)
      .end(request.body)
  })
}

/** Headers whose values differ from answer to answer, on every answer and on a create's. */
const PER_ANSWER = new Set(['x-request-id', 'date'])
const PER_CREATE = new Set([...PER_ANSWER, 'location', 'content-length'])
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/**
 * Throws unless `theirs` is the service's answer: the status; the body byte for byte, or for a
 * create the same fields in the same order with a new id, and a Location naming it; the same set
 * of header names, with the same values but for those that differ per answer; an X-Request-Id
 * made as the service makes it.
 */
export function checkSameAnswer(
  name: string,
  request: Request,
  ours: Answer,
  theirs: Answer,
): void {
  const fail = (what: string) => {
    throw new Error(`${name}, ${request.method} ${request.path}: ${what} differs from ours`)
  }
  if (theirs.status !== ours.status) fail(`the status (${theirs.status}, ours ${ours.status})`)
  const creates = request.method === 'POST'
  if (creates) {
    const [a, b] = [JSON.parse(ours.body), JSON.parse(theirs.body)]
    if (JSON.stringify({ ...a, id: 0 }) !== JSON.stringify({ ...b, id: 0 })) fail('the body')
    if (theirs.headers.get('location') !== `/v1/pets/${b.id}`) fail('the Location')
  } else if (theirs.body !== ours.body) fail('the body')
  const names = (answer: Answer) => [...answer.headers.keys()].sort().join(', ')
  if (names(theirs) !== names(ours)) fail(`the header set (${names(theirs)}; ours ${names(ours)})`)
  const varying = creates ? PER_CREATE : PER_ANSWER
  for (const [header, value] of ours.headers) {
    if (!varying.has(header) && theirs.headers.get(header) !== value) fail(`the ${header} header`)
  }
  if (!UUID.test(theirs.headers.get('x-request-id') ?? '')) fail('the X-Request-Id')
}
