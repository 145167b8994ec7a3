// The HTTP side of the same-bytes references (same-bytes.ts on SQLite, same-bytes-postgres.ts on
// PostgreSQL): a raw node:http server that answers the three operations with the service's own
// response headers on every answer: the security headers, `Cache-Control: no-store`, the JSON
// type, getPet's deprecation notice (service-headers.ts), a fresh X-Request-Id made as the service
// makes it, a Content-Length, and the service's keep-alive timeout. The body of a create is
// parsed with JSON.parse and its fields' types checked, no more; an Idempotency-Key is passed to
// the engine as sent, which does the service's database work for it (SQLite's group commit,
// group-commit.ts; same-bytes-postgres.ts with BENCH_KEYED=statement), or ignores it (PostgreSQL
// without). No logging, metrics, rate limit or load shedding. Each engine gives its reads and its
// durable create as callbacks, so that a synchronous engine answers in the same turn, as
// SQLite's does.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { NewPet, Pet } from '../../src/contract/schemas.ts'
import { KEEP_ALIVE_TIMEOUT_MS } from '../../src/http/http-server.ts'
import { requestId } from '../../src/http/plugins/request-id.ts'
import { newPetOf } from './group-commit.ts'
import type { Page } from './reads.ts'
import { GET_PET_HEADERS, OPERATION_HEADERS } from './service-headers.ts'

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

/** Listens on PORT and expects BENCH_AUTHORIZATION (the whole Authorization header). */
export function serveSameBytes(engine: SameBytesEngine): void {
  const authorization = process.env.BENCH_AUTHORIZATION
  createServer({ keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS }, (req, res) => {
    if (req.headers.authorization !== authorization) {
      answer(
        req,
        res,
        401,
        OPERATION_HEADERS,
        '{"code":"unauthorized","message":"no","status":401}',
      )
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
