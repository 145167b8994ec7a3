// Same bytes on PostgreSQL: what the service sends, from the same database, by the shortest path.
// A raw node:http server (same-bytes-http.ts: the service's response headers on every answer)
// with a pg Pool of the service's size (DATABASE_POOL_SIZE), running the service's own statements
// (src/store/postgres/pets.ts's PET_STATEMENTS: named on a direct connection, unnamed behind a
// transaction-mode pooler, as DATABASE_POOLER says, D19), with its int8 parsing and its bodies.
// createPet is the service's durable create: one INSERT … RETURNING that autocommits, the 201
// sent after it. The harness checks its statuses, bodies and headers against the service's.
//
// BENCH_KEYED=statement: a create with an Idempotency-Key runs the service's keyed statement
// (D14: the pet and its record in one statement) with what the service binds to it (the body's
// SHA-256 fingerprint, the answer around the new id, now and the end of a day's TTL), so that the
// keyed create can be measured beside what its statement costs by the shortest path. Without it
// the key is ignored, as the target for the keyed create is the plain durable create.
//
// BENCH_DRIVER=postgres runs the same statements through postgres.js (Postgres.js 3.4) instead
// of pg, with the same pool size and prepared statements on the same terms, so that the two
// drivers can be measured on our own statements (postgres.ts's driver table). BENCH_DRIVER=
// pg-pipeline runs them through pg's pipeline mode (pg 8.23, `pipeline: true`): as many clients
// as the pool has connections, each sending every query given to it without waiting for the
// answers before, taken in turn, instead of a pool lending each query a connection of its own.
//
//   node scripts/bench/same-bytes-postgres.ts <postgres url>
// with PORT, BENCH_AUTHORIZATION, DATABASE_POOL_SIZE, DATABASE_POOLER, BENCH_KEYED and
// BENCH_DRIVER in the environment.
import { Client, Pool } from 'pg'
import postgres from 'postgres'
import { int8AsNumber, type Statement } from '../../src/store/postgres/connection.ts'
import {
  keyedCreateValues,
  PET_STATEMENTS,
  type PetRow,
  toPet,
} from '../../src/store/postgres/pets.ts'
import { claimOf, pageOf, pageQuery, serveSameBytes } from './same-bytes-http.ts'

const url = process.argv[2] ?? ''
const max = Number(process.env.DATABASE_POOL_SIZE)
const named = process.env.DATABASE_POOLER !== 'transaction'
const keyedStatement = process.env.BENCH_KEYED === 'statement'

/** Runs one of the service's statements; the rows as the service's store gets them. */
type Query = (statement: Statement, values: unknown[]) => Promise<PetRow[]>

function pgQuery(): Query {
  const pool = new Pool({ connectionString: url, max, types: int8AsNumber })
  return (statement, values) => {
    const config = named ? { ...statement, values } : { text: statement.text, values }
    return pool.query<PetRow>(config).then((result) => result.rows)
  }
}

async function pgPipelineQuery(): Promise<Query> {
  const clients = Array.from(
    { length: max },
    () => new Client({ connectionString: url, types: int8AsNumber, pipeline: true }),
  )
  await Promise.all(clients.map((client) => client.connect()))
  let next = 0
  return (statement, values) => {
    const client = clients[next] as Client
    next = (next + 1) % clients.length
    const config = named ? { ...statement, values } : { text: statement.text, values }
    return client.query<PetRow>(config).then((result) => result.rows)
  }
}

function postgresJsQuery(): Query {
  // int8 (oid 20) as a number, as the store's int8AsNumber does; prepared statements where pg
  // names them (a direct connection), none behind a transaction-mode pooler.
  const int8 = { to: 20, from: [20], serialize: String, parse: Number }
  const sql = postgres(url, { max, prepare: named, types: { int8 } })
  return (statement, values) =>
    sql.unsafe(statement.text, values as never[], { prepare: named }) as unknown as Promise<
      PetRow[]
    >
}

const DRIVERS: Record<string, () => Query | Promise<Query>> = {
  pg: pgQuery,
  'pg-pipeline': pgPipelineQuery,
  postgres: postgresJsQuery,
}
const driver = DRIVERS[process.env.BENCH_DRIVER ?? 'pg']
if (driver === undefined) throw new Error(`BENCH_DRIVER: pg, pg-pipeline or postgres`)
const query = await driver()

serveSameBytes({
  list(limit, status, cursor, done) {
    const page = pageQuery(limit, status, cursor)
    if (page === undefined) return done(undefined, undefined)
    const rows =
      page.status === undefined
        ? query(PET_STATEMENTS.list, [page.afterId, page.limit + 1])
        : query(PET_STATEMENTS.listByStatus, [page.status, page.afterId, page.limit + 1])
    rows.then(
      (found) =>
        done(
          undefined,
          pageOf(found.slice(0, page.limit).map(toPet), found.length > page.limit, page),
        ),
      done,
    )
  },
  get(id, done) {
    query(PET_STATEMENTS.get, [id]).then(
      ([row]) => done(undefined, row === undefined ? undefined : JSON.stringify(toPet(row))),
      done,
    )
  },
  create(pet, key, done) {
    const rows =
      key !== undefined && keyedStatement
        ? // What the service binds to its keyed statement: the claim its route makes.
          query(PET_STATEMENTS.insertKeyed, keyedCreateValues(pet, claimOf(pet, key)))
        : query(PET_STATEMENTS.insert, [pet.name, pet.categoryId, pet.status ?? null])
    rows.then(([row]) => done(undefined, row === undefined ? undefined : toPet(row)), done)
  },
})
