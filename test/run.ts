// `npm test`: every test on SQLite and, at the same time, the store contract, the HTTP tests
// that depend on the engine and the scale tests on PostgreSQL (a fresh database per server or
// suite), and those HTTP tests, the three-instance scale test and the connection-loss test again
// with the services behind a private PgBouncer in transaction mode, with fewer server connections
// than clients (D19); the fleet behind HAProxy runs there only, as operators run one
// (groups.ts, FLEET_BEHIND_PGBOUNCER).
// Arguments are passed to every `node --test` run (e.g. --test-name-pattern).
//
// In each run the files that only build apps and stores in their own process share one process
// (`--test-isolation=none`); those in ISOLATED, which start processes, a browser or a database
// server of their own and mostly wait on them, get a process each, beside the shared one.
//
// Where no PostgreSQL is reachable, the PostgreSQL runs are replaced by one plain line and do not
// fail the run, unless PETSTORE_REQUIRE_POSTGRES=1 (CI), which makes it fail. Without PgBouncer
// its run is one plain line, or a failure with PETSTORE_REQUIRE_PGBOUNCER=1 (CI).
//
// The last line printed is the totals over every `node --test` run (test/summary.ts), with any
// run that failed without its counts saying so (one that crashed before it reported) named.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { globSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  FLEET_BEHIND_PGBOUNCER,
  ISOLATED,
  PGBOUNCER_RUN,
  POSTGRES_ONLY,
  POSTGRES_RUN,
} from './groups.ts'
import {
  absentLine,
  PGBOUNCER_REQUIRED,
  pgbouncerBinary,
  startPgBouncer,
} from './helpers/pgbouncer.ts'
import { POSTGRES_REQUIRED, postgresReachable, unreachableLine } from './helpers/postgres.ts'
import { parseCounts, type RunReport, totalLine } from './summary.ts'

const started = performance.now()
/** Each `node --test` run's counts, as it ends: the last line adds them up. */
const reports: RunReport[] = []

const forwarded = process.argv.slice(2)

// Node's compile cache, shared by the test processes and the services and commands they start
// (helpers/process.ts passes it on): each would otherwise strip and compile the same modules
// again (measured: `petstore --help` 0.24 → 0.09 s of CPU).
const env: NodeJS.ProcessEnv = {
  ...process.env,
  NODE_COMPILE_CACHE:
    process.env.NODE_COMPILE_CACHE ?? join(tmpdir(), 'petstore-test-compile-cache'),
}

/** The pooler's server connections: three instances of pool 10 share five (D19). */
const PGBOUNCER_POOL_SIZE = 5

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

interface RunOptions {
  /** Isolated files run this many at a time. */
  concurrency?: number
  /** Holds the output back (for a run going on beside another) instead of showing it. */
  keep?: boolean
}

/**
 * One `node --test` run, `name`d in the last line if it fails without saying so; `shared` runs
 * every file in one process (`--test-isolation=none`). Its output is read as it comes, for its
 * counts, and passed on unless it is kept.
 */
async function nodeTest(
  name: string,
  testFiles: string[],
  runEnv: NodeJS.ProcessEnv,
  { concurrency = 1, keep = false, shared = false }: RunOptions & { shared?: boolean },
): Promise<RunResult> {
  if (testFiles.length === 0) return { ok: true, output: '' }
  const child = spawn(
    process.execPath,
    [
      '--test',
      '--test-reporter=spec',
      shared ? '--test-isolation=none' : `--test-concurrency=${concurrency}`,
      ...forwarded,
      ...testFiles,
    ],
    { env: runEnv, stdio: ['ignore', 'pipe', 'pipe'] },
  )
  // Decoded as a stream: a character split between two chunks (ℹ is three bytes) stays whole.
  child.stdout.setEncoding('utf8')
  child.stderr.setEncoding('utf8')
  let output = ''
  let stdout = ''
  child.stdout.on('data', (chunk) => {
    stdout += chunk
    if (keep) output += chunk
    else process.stdout.write(chunk)
  })
  child.stderr.on('data', (chunk) => {
    if (keep) output += chunk
    else process.stderr.write(chunk)
  })
  const [code, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null]
  reports.push({ name, code, signal, counts: parseCounts(stdout) })
  return { ok: code === 0, output }
}

/**
 * The files of one engine's run: those that share a process, and beside them the ISOLATED ones,
 * a process each. Shown as they come unless `keep`; the shared part's report is kept and shown
 * after the isolated part's, so that the two do not interleave.
 */
async function engineRun(
  name: string,
  testFiles: string[],
  runEnv: NodeJS.ProcessEnv,
  { concurrency = 1, keep = false }: RunOptions = {},
): Promise<RunResult> {
  const isolated = new Set(files(ISOLATED))
  const [shared, alone] = await Promise.all([
    nodeTest(
      `${name} shared process`,
      testFiles.filter((file) => !isolated.has(file)),
      runEnv,
      { shared: true, keep: true },
    ),
    // In ISOLATED's order, longest first.
    nodeTest(
      `${name} isolated files`,
      ISOLATED.filter((file) => testFiles.includes(file)),
      runEnv,
      { concurrency, keep },
    ),
  ])
  if (!keep) process.stdout.write(shared.output)
  return { ok: shared.ok && alone.ok, output: keep ? alone.output + shared.output : '' }
}

const postgresEnv = { ...env, PETSTORE_TEST_DATABASE: 'postgres' }

/** The run behind PgBouncer, with its own private pooler, beside the direct PostgreSQL run. */
async function pgbouncerRun(): Promise<RunResult> {
  const bouncer = await startPgBouncer({ poolSize: PGBOUNCER_POOL_SIZE })
  try {
    return await engineRun(
      'PgBouncer',
      files(PGBOUNCER_RUN),
      { ...postgresEnv, PETSTORE_TEST_PGBOUNCER: `127.0.0.1:${bouncer.port}` },
      { keep: true },
    )
  } finally {
    await bouncer.stop()
  }
}

// The three runs go at once, the SQLite run's isolated files two at a time: most of their time
// is spent waiting on child processes, sockets and databases, which leaves the cores idle
// (measured: 0.6 of 2 cores busy when the runs went one after the other, a file at a time; 131 →
// 125 s wall when the PgBouncer run stopped waiting for the direct one). The PostgreSQL reports
// are printed after the SQLite run's.
const reachable = await postgresReachable()
const withPgbouncer = reachable && pgbouncerBinary() !== undefined
const postgresRuns = reachable
  ? (async () => {
      const [direct, behindPgbouncer] = await Promise.all([
        engineRun(
          'PostgreSQL',
          files(POSTGRES_RUN, withPgbouncer ? FLEET_BEHIND_PGBOUNCER : []),
          postgresEnv,
          { keep: true },
        ),
        withPgbouncer ? pgbouncerRun() : undefined,
      ])
      return { direct, behindPgbouncer }
    })()
  : undefined

console.log('== SQLite: every test')
const sqliteOk = (
  await engineRun('SQLite', files(['test/**/*.test.ts'], POSTGRES_ONLY), env, { concurrency: 2 })
).ok

let postgresOk = true
let pgbouncerOk = true
/** A required database that was missing: a failure no run counts. */
const missing: string[] = []
if (postgresRuns !== undefined) {
  const { direct, behindPgbouncer } = await postgresRuns
  console.log('== PostgreSQL: store contract, engine-dependent HTTP behaviour, scale')
  process.stdout.write(direct.output)
  postgresOk = direct.ok
  if (behindPgbouncer !== undefined) {
    console.log('== PostgreSQL behind PgBouncer (transaction mode): HTTP behaviour, scale')
    process.stdout.write(behindPgbouncer.output)
    pgbouncerOk = behindPgbouncer.ok
  } else if (PGBOUNCER_REQUIRED) {
    console.log(`${absentLine()}; PETSTORE_REQUIRE_PGBOUNCER=1 makes that a failure`)
    pgbouncerOk = false
    missing.push('no PgBouncer run (PETSTORE_REQUIRE_PGBOUNCER=1)')
  } else {
    console.log(absentLine())
  }
} else if (POSTGRES_REQUIRED) {
  console.log(`${unreachableLine()}; PETSTORE_REQUIRE_POSTGRES=1 makes that a failure`)
  postgresOk = false
  missing.push('no PostgreSQL runs (PETSTORE_REQUIRE_POSTGRES=1)')
} else {
  console.log(unreachableLine())
}

console.log(totalLine(reports, performance.now() - started, missing))
process.exitCode = sqliteOk && postgresOk && pgbouncerOk ? 0 : 1
