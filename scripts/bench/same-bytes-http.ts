// The HTTP side of the references that send the same bytes as the service (same-bytes.ts,
// same-bytes-postgres.ts; fastify-floor.ts takes its headers, body check and pages from here): a
// raw node:http server answering the three operations with the service's own response headers,
// from the service's own definitions, a fresh X-Request-Id made as the service makes it, a
// Content-Length and the service's keep-alive timeout. A create's body is parsed with JSON.parse
// and its fields' types checked, no more; an Idempotency-Key goes to the engine as sent, which does
// the service's database work for it (claimOf) or ignores it. No logging, metrics, rate limit or
// load shedding. Each engine answers by callbacks, so that a synchronous one (SQLite) answers in
// the same turn. The harness checks every status, body and header against the service's.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { IDEMPOTENCY_TTL_DEFAULT_SECONDS, LIST_LIMIT } from '../../src/contract/limits.ts'
import type { NewPet, Pet, PetStatus } from '../../src/contract/schemas.ts'
import { KEEP_ALIVE_TIMEOUT_MS } from '../../src/http/http-server.ts'
import { deprecationHeaders } from '../../src/http/plugins/deprecation.ts'
import { requestId } from '../../src/http/plugins/request-id.ts'
import { securityHeaders } from '../../src/http/plugins/security.ts'
import { decodeCursor, nextPageLink } from '../../src/http/routes/cursor.ts'
import { createClaim } from '../../src/http/routes/idempotency.ts'
import { getPetDeprecation } from '../../src/http/routes/pets.ts'
import type { IdempotencyClaim } from '../../src/store/store.ts'

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

const STATUSES: readonly (PetStatus | undefined)[] = ['available', 'pending', 'sold', undefined]

/** The NewPet in a parsed body, or undefined: the fields' types, no more (a reference's check). */
export function newPetOf(value: unknown): NewPet | undefined {
  if (typeof value !== 'object' || value === null) return undefined
  const { name, categoryId, status } = value as Record<string, unknown>
  if (typeof name !== 'string' || name === '' || !Number.isSafeInteger(categoryId)) return undefined
  if (!STATUSES.includes(status as PetStatus | undefined)) return undefined
  const pet: NewPet = { name, categoryId: categoryId as number }
  if (status !== undefined) pet.status = status as PetStatus
  return pet
}

/**
 * The claim the service's route makes for a create with `key` (routes/pets.ts: the body's
 * fingerprint, the answer around the new id, now and the end of the default TTL). Its owner: any
 * text will do (no foreign key); the service's is the API key's id.
 */
export function claimOf(pet: NewPet, key: string): IdempotencyClaim {
  const ttlMs = IDEMPOTENCY_TTL_DEFAULT_SECONDS * 1000
  return createClaim(pet, { apiKeyId: 'same-bytes', key, nowMs: Date.now(), ttlMs })
}

/** listPets' 200 body, and its Link when more follow. */
export type Page = { body: string; link: string | undefined }

/** A listPets query as the store takes it. */
type PageQuery = { limit: number; status: PetStatus | undefined; afterId: number }

/** The query's parameters as the store takes them, or undefined when malformed (a 400). */
export function pageQuery(
  limitParam: string | undefined,
  statusParam: string | undefined,
  cursor: string | undefined,
): PageQuery | undefined {
  const limit = Number(limitParam ?? LIST_LIMIT.default)
  let afterId: number | undefined
  try {
    // The id after which the page starts, by the service's own cursor decoder.
    afterId = cursor === undefined ? 0 : decodeCursor(cursor)
  } catch {}
  const limitOk =
    Number.isInteger(limit) && limit >= LIST_LIMIT.minimum && limit <= LIST_LIMIT.maximum
  if (afterId === undefined || !limitOk) return undefined
  return { limit, status: statusParam as PetStatus | undefined, afterId }
}

/** The page of `pets` (at most the limit), and its Link when `more` follow. */
export function pageOf(pets: Pet[], more: boolean, { limit, status }: PageQuery): Page {
  const last = pets.at(-1)
  return {
    body: JSON.stringify(pets),
    link: more && last !== undefined ? nextPageLink('/v1/pets', limit, status, last.id) : undefined,
  }
}

/** One engine's operations; `undefined` for a malformed query (400) or a missing pet (404). */
export interface SameBytesEngine {
  list(
    limit: string | undefined,
    status: string | undefined,
    cursor: string | undefined,
    done: (err: unknown, page?: Page) => void,
  ): void
  get(id: number, done: (err: unknown, body?: string) => void): void
  /** `key`: the request's Idempotency-Key, unchecked; undefined without one. */
  create(pet: NewPet, key: string | undefined, done: (err: unknown, created?: Pet) => void): void
}

/** One answer: the fixed headers, then what differs per answer. */
function answer(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  headers: Readonly<Record<string, string>>,
  body: string,
  extra?: Record<string, string>,
): void {
  res
    .writeHead(status, {
      ...headers,
      ...extra,
      'x-request-id': requestId(req),
      // Without it, a body after writeHead goes chunked; the service sends a length.
      'content-length': Buffer.byteLength(body),
    })
    .end(body)
}

function listPets(
  engine: SameBytesEngine,
  req: IncomingMessage,
  res: ServerResponse,
  search: string,
) {
  const query = new URLSearchParams(search)
  const limit = query.get('limit') ?? undefined
  const status = query.get('status') ?? undefined
  engine.list(limit, status, query.get('cursor') ?? undefined, (err, page) => {
    if (err !== undefined) answer(req, res, 503, OPERATION_HEADERS, '{}')
    else if (page === undefined) answer(req, res, 400, OPERATION_HEADERS, '{}')
    else if (page.link === undefined) answer(req, res, 200, OPERATION_HEADERS, page.body)
    else answer(req, res, 200, OPERATION_HEADERS, page.body, { link: page.link })
  })
}

function getPet(engine: SameBytesEngine, req: IncomingMessage, res: ServerResponse, id: number) {
  engine.get(id, (err, body) => {
    if (err !== undefined) answer(req, res, 503, GET_PET_HEADERS, '{}')
    else if (body === undefined) answer(req, res, 404, GET_PET_HEADERS, '{}')
    else answer(req, res, 200, GET_PET_HEADERS, body)
  })
}

function createPet(engine: SameBytesEngine, req: IncomingMessage, res: ServerResponse) {
  let text = ''
  req.setEncoding('utf8')
  req.on('data', (chunk: string) => {
    text += chunk
  })
  req.on('end', () => {
    let pet: NewPet | undefined
    try {
      pet = newPetOf(JSON.parse(text))
    } catch {
      pet = undefined
    }
    if (pet === undefined) {
      answer(req, res, 400, OPERATION_HEADERS, '{}')
      return
    }
    const key = req.headers['idempotency-key']
    engine.create(pet, typeof key === 'string' ? key : undefined, (err, created) => {
      if (err !== undefined || created === undefined) {
        answer(req, res, 503, OPERATION_HEADERS, '{}')
        return
      }
      answer(req, res, 201, OPERATION_HEADERS, JSON.stringify(created), {
        location: `/v1/pets/${created.id}`,
      })
    })
  })
}

/** The references' 401 body. */
export const UNAUTHORIZED = '{"code":"unauthorized","message":"no","status":401}'

/** Listens on PORT and expects BENCH_AUTHORIZATION (the whole Authorization header). */
export function serveSameBytes(engine: SameBytesEngine): void {
  const authorization = process.env.BENCH_AUTHORIZATION
  createServer({ keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS }, (req, res) => {
    if (req.headers.authorization !== authorization) {
      answer(req, res, 401, OPERATION_HEADERS, UNAUTHORIZED)
      return
    }
    const url = req.url ?? ''
    const queryAt = url.indexOf('?')
    const path = queryAt === -1 ? url : url.slice(0, queryAt)
    const petId = /^\/v1\/pets\/(\d{1,15})$/.exec(path)?.[1]
    if (req.method === 'POST' && path === '/v1/pets') createPet(engine, req, res)
    else if (req.method !== 'GET') answer(req, res, 405, OPERATION_HEADERS, '{}')
    else if (path === '/v1/pets') {
      listPets(engine, req, res, queryAt === -1 ? '' : url.slice(queryAt + 1))
    } else if (petId !== undefined) getPet(engine, req, res, Number(petId))
    else answer(req, res, 404, OPERATION_HEADERS, '{}')
  }).listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write('ready\n'))
}
