// `npm test`: every test on SQLite, then the store contract, the HTTP behaviour tests and the
// scale tests on PostgreSQL (a fresh database per server or suite). Arguments are passed to
// both `node --test` runs (e.g. --test-name-pattern).
//
// Where no PostgreSQL is reachable, the second run is replaced by one plain line and does not
// fail the run, unless PETSTORE_REQUIRE_POSTGRES=1 (CI), which makes it fail.
//
// A third run (D19) repeats the HTTP behaviour tests and the three-instance scale test with the
// services behind a private PgBouncer in transaction mode, with fewer server connections than
// clients. Without PgBouncer it is one plain line, or a failure with PETSTORE_REQUIRE_PGBOUNCER=1.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { globSync } from 'node:fs'
import {
  absentLine,
  PGBOUNCER_REQUIRED,
  pgbouncerBinary,
  startPgBouncer,
} from './helpers/pgbouncer.ts'
import { POSTGRES_REQUIRED, postgresReachable, unreachableLine } from './helpers/postgres.ts'

const forwarded = process.argv.slice(2)

/** Test files that exist only for PostgreSQL; the SQLite run leaves them out. */
const POSTGRES_ONLY = [
  'test/store/postgres.test.ts',
  'test/store/pgbouncer.test.ts',
  'test/scale/*.test.ts',
]
const POSTGRES_RUN = ['test/http/*.test.ts', ...POSTGRES_ONLY]
const PGBOUNCER_RUN = ['test/http/*.test.ts', 'test/scale/instances.test.ts']
/** The pooler's server connections: three instances of pool 10 share five (D19). */
const PGBOUNCER_POOL_SIZE = 5

function files(patterns: string[], exclude: string[] = []): string[] {
  const excluded = new Set(globSync(exclude))
  const found = patterns.flatMap((pattern) => globSync(pattern))
  return [...new Set(found)].filter((file) => !excluded.has(file)).sort()
}

async function nodeTest(testFiles: string[], env: NodeJS.ProcessEnv): Promise<boolean> {
  const child = spawn(
    process.execPath,
    ['--test', '--test-reporter=spec', ...forwarded, ...testFiles],
    { env, stdio: 'inherit' },
  )
  const [code] = await once(child, 'exit')
  return code === 0
}

console.log('== SQLite: every test')
const sqliteOk = await nodeTest(files(['test/**/*.test.ts'], POSTGRES_ONLY), process.env)

let postgresOk = true
const reachable = await postgresReachable()
if (reachable) {
  console.log('== PostgreSQL: store contract, HTTP behaviour, scale')
  postgresOk = await nodeTest(files(POSTGRES_RUN), {
    ...process.env,
    PETSTORE_TEST_DATABASE: 'postgres',
  })
} else if (POSTGRES_REQUIRED) {
  console.log(`${unreachableLine()}; PETSTORE_REQUIRE_POSTGRES=1 makes that a failure`)
  postgresOk = false
} else {
  console.log(unreachableLine())
}

let pgbouncerOk = true
if (reachable && pgbouncerBinary() !== undefined) {
  console.log('== PostgreSQL behind PgBouncer (transaction mode): HTTP behaviour, scale')
  const bouncer = await startPgBouncer({ poolSize: PGBOUNCER_POOL_SIZE })
  try {
    pgbouncerOk = await nodeTest(files(PGBOUNCER_RUN), {
      ...process.env,
      PETSTORE_TEST_DATABASE: 'postgres',
      PETSTORE_TEST_PGBOUNCER: `127.0.0.1:${bouncer.port}`,
    })
  } finally {
    await bouncer.stop()
  }
} else if (reachable && PGBOUNCER_REQUIRED) {
  console.log(`${absentLine()}; PETSTORE_REQUIRE_PGBOUNCER=1 makes that a failure`)
  pgbouncerOk = false
} else if (reachable) {
  console.log(absentLine())
}

process.exitCode = sqliteOk && postgresOk && pgbouncerOk ? 0 : 1
