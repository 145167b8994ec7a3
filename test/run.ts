// `npm test`: every test on SQLite, then the store contract, the HTTP tests that depend on the
// engine and the scale tests on PostgreSQL (a fresh database per server or suite). Arguments are passed to
// both `node --test` runs (e.g. --test-name-pattern).
//
// Where no PostgreSQL is reachable, the second run is replaced by one plain line and does not
// fail the run, unless PETSTORE_REQUIRE_POSTGRES=1 (CI), which makes it fail.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { globSync } from 'node:fs'
import { POSTGRES_REQUIRED, postgresReachable, unreachableLine } from './helpers/postgres.ts'

const forwarded = process.argv.slice(2)

/** Test files that exist only for PostgreSQL; the SQLite run leaves them out. */
const POSTGRES_ONLY = ['test/store/postgres.test.ts', 'test/scale/*.test.ts']
/**
 * The HTTP tests whose outcome depends on the engine: what is stored and read back, readiness,
 * a failing database, the pool's metrics. The others (auth, errors, headers, validation, logs,
 * load shedding, rate limits) never reach past the store interface; they run once, on SQLite.
 */
const ENGINE_HTTP = [
  'create-pet',
  'create-pet-bytes',
  'get-pet',
  'health',
  'idempotency',
  'list-pets',
  'metrics',
  'unavailable',
].map((name) => `test/http/${name}.test.ts`)
const POSTGRES_RUN = [...ENGINE_HTTP, ...POSTGRES_ONLY]

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
if (await postgresReachable()) {
  console.log('== PostgreSQL: store contract, engine-dependent HTTP behaviour, scale')
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

process.exitCode = sqliteOk && postgresOk ? 0 : 1
