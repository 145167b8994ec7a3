// Same bytes: the database limit (db-limit.ts) sending what the service sends. A raw node:http
// server on the service's SQLite file that runs the same SQL and writes the same bodies
// (reads.ts), with the service's own response headers on every answer: the security headers,
// `Cache-Control: no-store`, the JSON type, getPet's deprecation notice (service-headers.ts), a
// fresh X-Request-Id made as the service makes it, a Content-Length, and the service's keep-alive
// timeout. createPet is durable as the service's is: the file opened with WAL and
// synchronous=FULL, every create of one event-loop turn in one transaction, each 201 (the
// service's body and Location) sent after its COMMIT (group-commit.ts); the body is parsed with
// JSON.parse and its fields' types checked, no more. An Idempotency-Key is ignored: the target
// for the keyed create is this plain durable create. Nothing else: no logging, metrics, rate
// limit or load shedding. The harness checks its statuses, bodies and headers against the
// service's on every run.
//
//   node scripts/bench/same-bytes.ts <sqlite file>
// with PORT and BENCH_AUTHORIZATION (the whole Authorization header expected) in the environment.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { KEEP_ALIVE_TIMEOUT_MS } from '../../src/http-server.ts'
import { requestId } from '../../src/plugins/request-id.ts'
import { GroupCommit, newPetOf, openDurable } from './group-commit.ts'
import { petReads } from './reads.ts'
import { GET_PET_HEADERS, OPERATION_HEADERS } from './service-headers.ts'

const authorization = process.env.BENCH_AUTHORIZATION
const db = openDurable(process.argv[2] ?? '')
const reads = petReads(db)
const commits = new GroupCommit(db)

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

function listPets(req: IncomingMessage, res: ServerResponse, search: string): void {
  const query = new URLSearchParams(search)
  const page = reads.list(
    query.get('limit') ?? undefined,
    query.get('status') ?? undefined,
    query.get('cursor') ?? undefined,
  )
  if (page === undefined) answer(req, res, 400, OPERATION_HEADERS, '{}')
  else if (page.link === undefined) answer(req, res, 200, OPERATION_HEADERS, page.body)
  else answer(req, res, 200, OPERATION_HEADERS, page.body, { link: page.link })
}

function getPet(req: IncomingMessage, res: ServerResponse, id: number): void {
  const body = reads.get(id)
  if (body === undefined) answer(req, res, 404, GET_PET_HEADERS, '{}')
  else answer(req, res, 200, GET_PET_HEADERS, body)
}

function createPet(req: IncomingMessage, res: ServerResponse): void {
  let text = ''
  req.setEncoding('utf8')
  req.on('data', (chunk: string) => {
    text += chunk
  })
  req.on('end', () => {
    let pet: ReturnType<typeof newPetOf>
    try {
      pet = newPetOf(JSON.parse(text))
    } catch {
      pet = undefined
    }
    if (pet === undefined) {
      answer(req, res, 400, OPERATION_HEADERS, '{}')
      return
    }
    commits.create(pet, (err, created) => {
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

createServer({ keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS }, (req, res) => {
  if (req.headers.authorization !== authorization) {
    answer(req, res, 401, OPERATION_HEADERS, '{"code":"unauthorized","message":"no","status":401}')
    return
  }
  const url = req.url ?? ''
  const queryAt = url.indexOf('?')
  const path = queryAt === -1 ? url : url.slice(0, queryAt)
  const petId = /^\/v1\/pets\/(\d{1,15})$/.exec(path)?.[1]
  if (req.method === 'POST' && path === '/v1/pets') createPet(req, res)
  else if (req.method !== 'GET') answer(req, res, 405, OPERATION_HEADERS, '{}')
  else if (path === '/v1/pets') listPets(req, res, queryAt === -1 ? '' : url.slice(queryAt + 1))
  else if (petId !== undefined) getPet(req, res, Number(petId))
  else answer(req, res, 404, OPERATION_HEADERS, '{}')
}).listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write('ready\n'))
