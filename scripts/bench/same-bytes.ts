// Same bytes on SQLite: the database limit (db-limit.ts) sending what the service sends. A raw
// node:http server (same-bytes-http.ts: the service's response headers on every answer) on the
// service's SQLite file, running the same SQL and writing the same bodies (reads.ts). createPet
// is durable as the service's is: the file opened with WAL and synchronous=FULL, every create of
// one event-loop turn in one transaction, each 201 sent after its COMMIT (group-commit.ts); with
// an Idempotency-Key, the service's database work for it: its fingerprint of the body, then the
// pet and the key's record in that transaction, by the service's statements. The harness checks
// its statuses, bodies and headers against the service's on every run.
//
//   node scripts/bench/same-bytes.ts <sqlite file>
// with PORT and BENCH_AUTHORIZATION (the whole Authorization header expected) in the environment.
import { GroupCommit, openDurable } from './group-commit.ts'
import { petReads } from './reads.ts'
import { serveSameBytes } from './same-bytes-http.ts'

const db = openDurable(process.argv[2] ?? '')
const reads = petReads(db)
const commits = new GroupCommit(db)

serveSameBytes({
  list: (limit, status, cursor, done) => done(undefined, reads.list(limit, status, cursor)),
  get: (id, done) => done(undefined, reads.get(id)),
  create: (pet, key, done) => commits.create(pet, key, done),
})
