// The database limit: the fastest a Node.js HTTP server can answer the read operations from the
// service's SQLite file. Where the ceiling (ceiling.ts) answers precomputed bytes, this one reads
// the database for every answer, as the service must: a raw node:http server that checks the
// Authorization header, runs the service's own indexed queries (the SQL of src/store/sqlite.ts)
// as prepared statements returning arrays, answers JSON.stringify of the rows as the contract's
// objects, and a Link header when more follow. Nothing else: no validation beyond what keeps a
// query well-formed, no security headers, no logging, no metrics. Its bodies and Link headers
// are the service's, byte for byte (the harness checks them).
//
//   node scripts/bench/db-limit.ts <sqlite file>
// with PORT and BENCH_AUTHORIZATION (the whole Authorization header expected) in the environment.
import { createServer, type ServerResponse } from 'node:http'
import { DatabaseSync, type StatementSync } from 'node:sqlite'
import { LIST_LIMIT } from '../../src/contract/limits.ts'
import type { Pet, PetStatus } from '../../src/contract/schemas.ts'
import { decodeCursor, nextPageLink } from '../../src/routes/cursor.ts'

const authorization = process.env.BENCH_AUTHORIZATION
const db = new DatabaseSync(process.argv[2] ?? '', { readOnly: true })

function prepare(sql: string): StatementSync {
  const statement = db.prepare(sql)
  statement.setReturnArrays(true)
  return statement
}
// The statements of src/store/sqlite.ts (SqlitePetRepository), word for word.
const PET_COLUMNS = 'id, name, category_id, status'
const get = prepare(`SELECT ${PET_COLUMNS} FROM pets WHERE id = ?`)
const list = prepare(`SELECT ${PET_COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ?`)
const listByStatus = prepare(
  `SELECT ${PET_COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`,
)

type PetRow = [id: number, name: string, categoryId: number, status: PetStatus | null]

/** The contract's Pet: its fields in its order, `status` left out when the row has none. */
function toPet(row: PetRow): Pet {
  const pet: Pet = { id: row[0], name: row[1], categoryId: row[2] }
  if (row[3] !== null) pet.status = row[3]
  return pet
}

const JSON_TYPE = 'application/json; charset=utf-8'
function answer(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': JSON_TYPE }).end(body)
}

/** The id after which the page starts (the service's own cursor decoder), or undefined. */
function afterIdOf(cursor: string | null): number | undefined {
  try {
    return cursor === null ? 0 : decodeCursor(cursor)
  } catch {
    return undefined
  }
}

function listPets(res: ServerResponse, search: string): void {
  const query = new URLSearchParams(search)
  const limit = Number(query.get('limit') ?? LIST_LIMIT.default)
  const status = (query.get('status') ?? undefined) as PetStatus | undefined
  const afterId = afterIdOf(query.get('cursor'))
  const limitOk =
    Number.isInteger(limit) && limit >= LIST_LIMIT.minimum && limit <= LIST_LIMIT.maximum
  if (afterId === undefined || !limitOk) {
    answer(res, 400, '{}')
    return
  }
  // One row more than asked tells whether another page follows, as the service does.
  const rows = (status === undefined
    ? list.all(afterId, limit + 1)
    : listByStatus.all(status, afterId, limit + 1)) as unknown as PetRow[]
  const pets = rows.slice(0, limit).map(toPet)
  const last = pets.at(-1)
  if (rows.length > limit && last !== undefined) {
    res.setHeader('link', nextPageLink('/v1/pets', limit, status, last.id))
  }
  answer(res, 200, JSON.stringify(pets))
}

function getPet(res: ServerResponse, id: number): void {
  const row = get.get(id) as unknown as PetRow | undefined
  if (row === undefined) answer(res, 404, '{}')
  else answer(res, 200, JSON.stringify(toPet(row)))
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
