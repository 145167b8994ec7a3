// The database limit: the fastest a Node.js HTTP server can answer the read operations from the
// service's SQLite file. Where the ceiling (ceiling.ts) answers precomputed bytes, this one reads
// the database for every answer, as the service must: a raw node:http server that checks the
// Authorization header, runs the service's own indexed queries (the SQL of src/store/sqlite/pets.ts)
// as prepared statements returning arrays, answers JSON.stringify of the rows as the contract's
// objects, and a Link header when more follow (reads.ts, shared with same-bytes.ts and
// fastify-floor.ts). Nothing else: no validation beyond what keeps a query well-formed, no
// security headers, no logging, no metrics. Its bodies and Link headers are the service's, byte
// for byte (the harness checks them); its framing is not (chunked, where the service sends a
// Content-Length).
//
//   node scripts/bench/db-limit.ts <sqlite file>
// with PORT and BENCH_AUTHORIZATION (the whole Authorization header expected) in the environment.
import { createServer, type ServerResponse } from 'node:http'
import { DatabaseSync } from 'node:sqlite'
import { petReads } from './reads.ts'

const authorization = process.env.BENCH_AUTHORIZATION
const reads = petReads(new DatabaseSync(process.argv[2] ?? '', { readOnly: true }))

const JSON_TYPE = 'application/json; charset=utf-8'
function answer(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': JSON_TYPE }).end(body)
}

function listPets(res: ServerResponse, search: string): void {
  const query = new URLSearchParams(search)
  const page = reads.list(
    query.get('limit') ?? undefined,
    query.get('status') ?? undefined,
    query.get('cursor') ?? undefined,
  )
  if (page === undefined) {
    answer(res, 400, '{}')
    return
  }
  if (page.link !== undefined) res.setHeader('link', page.link)
  answer(res, 200, page.body)
}

function getPet(res: ServerResponse, id: number): void {
  const body = reads.get(id)
  if (body === undefined) answer(res, 404, '{}')
  else answer(res, 200, body)
}

createServer((req, res) => {
  if (req.headers.authorization !== authorization) {
    answer(res, 401, '{"code":"unauthorized","message":"no","status":401}')
    return
  }
  const url = req.url ?? ''
  const queryAt = url.indexOf('?')
  const path = queryAt === -1 ? url : url.slice(0, queryAt)
  const petId = /^\/v1\/pets\/(\d{1,15})$/.exec(path)?.[1]
  if (req.method !== 'GET') answer(res, 405, '{}')
  else if (path === '/v1/pets') listPets(res, queryAt === -1 ? '' : url.slice(queryAt + 1))
  else if (petId !== undefined) getPet(res, Number(petId))
  else answer(res, 404, '{}')
}).listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write('ready\n'))
