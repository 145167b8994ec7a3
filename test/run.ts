// `npm test`: every test on SQLite and, at the same time, the store contract, the HTTP tests
// that depend on the engine and the scale tests on PostgreSQL (a fresh database per server or
// suite). Arguments are passed to both `node --test` runs (e.g. --test-name-pattern).
//
// Where no PostgreSQL is reachable, the second run is replaced by one plain line and does not
// fail the run, unless PETSTORE_REQUIRE_POSTGRES=1 (CI), which makes it fail.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { globSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { POSTGRES_REQUIRED, postgresReachable, unreachableLine } from './helpers/postgres.ts'

const forwarded = process.argv.slice(2)

// Node's compile cache, shared by the test processes and the services and commands they start
// (helpers/process.ts passes it on): each would otherwise strip and compile the same modules
// again (measured: `petstore --help` 0.24 → 0.09 s of CPU).
const env: NodeJS.ProcessEnv = {
  ...process.env,
  NODE_COMPILE_CACHE:
    process.env.NODE_COMPILE_CACHE ?? join(tmpdir(), 'petstore-test-compile-cache'),
}

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

interface RunResult {
  ok: boolean
  /** What the run printed, when it was kept rather than shown as it came. */
  output: string
}

/**
 * One `node --test` run of `concurrency` files at a time; `keep` holds its output back (for a
 * run going on beside another).
 */
async function nodeTest(
  testFiles: string[],
  env: NodeJS.ProcessEnv,
  { concurrency = 1, keep = false } = {},
): Promise<RunResult> {
  const child = spawn(
    process.execPath,
    [
      '--test',
      '--test-reporter=spec',
      `--test-concurrency=${concurrency}`,
      ...forwarded,
      ...testFiles,
    ],
    { env, stdio: keep ? ['ignore', 'pipe', 'pipe'] : 'inherit' },
  )
  let output = ''
  child.stdout?.on('data', (chunk) => {
    output += chunk
  })
  child.stderr?.on('data', (chunk) => {
    output += chunk
  })
  const [code] = await once(child, 'close')
  return { ok: code === 0, output }
}

// The two runs go at once, the longer SQLite run two files at a time: most of their time is
// spent waiting on child processes, sockets and databases, which leaves the cores idle
// (measured: 0.6 of 2 cores busy when the runs went one after the other, a file at a time).
// The PostgreSQL run's report is printed after the SQLite run's.
const postgresRun = (await postgresReachable())
  ? nodeTest(files(POSTGRES_RUN), { ...env, PETSTORE_TEST_DATABASE: 'postgres' }, { keep: true })
  : undefined

console.log('== SQLite: every test')
const sqliteFiles = files(['test/**/*.test.ts'], POSTGRES_ONLY)
const sqliteOk = (await nodeTest(sqliteFiles, env, { concurrency: 2 })).ok

let postgresOk = true
if (postgresRun !== undefined) {
  console.log('== PostgreSQL: store contract, engine-dependent HTTP behaviour, scale')
  const { ok, output } = await postgresRun
  process.stdout.write(output)
  postgresOk = ok
} else if (POSTGRES_REQUIRED) {
  console.log(`${unreachableLine()}; PETSTORE_REQUIRE_POSTGRES=1 makes that a failure`)
  postgresOk = false
} else {
  console.log(unreachableLine())
}

process.exitCode = sqliteOk && postgresOk ? 0 : 1
