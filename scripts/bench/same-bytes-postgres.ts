// Same bytes on PostgreSQL: what the service sends, from the same database, by the shortest path.
// A raw node:http server (same-bytes-http.ts: the service's response headers on every answer)
// with a pg Pool of the service's size (DATABASE_POOL_SIZE), running the service's own statements
// (src/store/postgres.ts's PET_STATEMENTS: named on a direct connection, unnamed behind a
// transaction-mode pooler, as DATABASE_POOLER says, D19), with its int8 parsing and its bodies.
// createPet is the service's durable create: one INSERT … RETURNING that autocommits, the 201
// sent after it. The harness checks its statuses, bodies and headers against the service's.
//
// BENCH_DRIVER=postgres runs the same statements through postgres.js (Postgres.js 3.4) instead
// of pg, with the same pool size and prepared statements on the same terms, so that the two
// drivers can be measured on our own statements (postgres.ts's driver table).
//
//   node scripts/bench/same-bytes-postgres.ts <postgres url>
// with PORT, BENCH_AUTHORIZATION, DATABASE_POOL_SIZE, DATABASE_POOLER and BENCH_DRIVER in the
// environment.
import { Pool } from 'pg'
import postgres from 'postgres'
import {
  int8AsNumber,
  PET_STATEMENTS,
  type PetRow,
  type Statement,
  toPet,
} from '../../src/store/postgres.ts'
import { pageOf, pageQuery } from './reads.ts'
import { serveSameBytes } from './same-bytes-http.ts'

const url = process.argv[2] ?? ''
const max = Number(process.env.DATABASE_POOL_SIZE)
const named = process.env.DATABASE_POOLER !== 'transaction'

/** Runs one of the service's statements; the rows as the service's store gets them. */
type Query = (statement: Statement, values: unknown[]) => Promise<PetRow[]>

function pgQuery(): Query {
  const pool = new Pool({ connectionString: url, max, types: int8AsNumber })
  return (statement, values) => {
    const config = named ? { ...statement, values } : { text: statement.text, values }
    return pool.query<PetRow>(config).then((result) => result.rows)
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

const query = process.env.BENCH_DRIVER === 'postgres' ? postgresJsQuery() : pgQuery()

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
  create(pet, done) {
    query(PET_STATEMENTS.insert, [pet.name, pet.categoryId, pet.status ?? null]).then(
      ([row]) => done(undefined, row === undefined ? undefined : toPet(row)),
      done,
    )
  },
})
