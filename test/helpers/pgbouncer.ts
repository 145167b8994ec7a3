// PgBouncer for tests and the benchmark: a private instance in transaction mode on a free port,
// its own config in a temp folder, in front of the test server (ADMIN_URL's host and port, or
// another upstream given), stopped at the end. Services connect through it; creating and dropping
// databases still goes straight to PostgreSQL (postgres.ts).
//
// PgBouncer refuses to run as root, so as root the folder is handed to the `postgres` user and
// PgBouncer started with `-u postgres`.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Client } from 'pg'
import { debianProgram } from './debian-program.ts'
import { freePort } from './free-port.ts'
import { ADMIN_URL } from './postgres.ts'

/** CI sets this: a missing PgBouncer then fails the run instead of skipping its tests. */
export const PGBOUNCER_REQUIRED = process.env.PETSTORE_REQUIRE_PGBOUNCER === '1'

/** Debian's, unless PETSTORE_PGBOUNCER names another. */
const pgbouncer = debianProgram({
  name: 'pgbouncer',
  candidates: ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'],
  override: process.env.PETSTORE_PGBOUNCER,
  absent: 'PgBouncer is not installed (Debian package pgbouncer); the PgBouncer tests are skipped',
  required: { variable: 'PETSTORE_REQUIRE_PGBOUNCER', set: PGBOUNCER_REQUIRED },
})

/** The pgbouncer binary, or undefined where it is not installed. */
export const pgbouncerBinary = pgbouncer.binary
/** The one line printed where PgBouncer is absent. */
export const absentLine = pgbouncer.absentLine
/** For a file whose tests need PgBouncer: undefined when it is there, else the reason to skip. */
export const pgbouncerSkipReason = pgbouncer.skipReason

export interface PgBouncerOptions {
  /** Server connections per database and user (PgBouncer's default_pool_size). */
  poolSize: number
  /** The PostgreSQL server behind it; ADMIN_URL's host and port unless given. */
  upstream?: { host: string; port: number }
}

export interface PgBouncer {
  port: number
  /** A URL for `database` through the pooler, with ADMIN_URL's user. */
  urlFor(database: string): string
  /** Rewrites a PostgreSQL URL (e.g. a test database's) to go through the pooler. */
  through(url: string): string
  /** What PgBouncer wrote to stderr so far (its log). */
  log(): string
  /** Kills it with `signal` (SIGKILL unless given: no goodbye to any client) and waits until it is gone. */
  kill(signal?: NodeJS.Signals): Promise<void>
  /** After kill(): starts it again on the same port with the same settings, and waits until it answers. */
  restart(): Promise<void>
  stop(): Promise<void>
}

function upstreamOf(url: string): { host: string; port: number } {
  const parsed = new URL(url)
  return { host: parsed.hostname, port: Number(parsed.port || '5432') }
}

function config(dir: string, port: number, options: PgBouncerOptions): string {
  const upstream = options.upstream ?? upstreamOf(ADMIN_URL)
  return `[databases]
; Any database name, on the one server: each test creates its own database.
* = host=${upstream.host} port=${upstream.port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${port}
unix_socket_dir =
pool_mode = transaction
default_pool_size = ${options.poolSize}
max_client_conn = 1000
; The test server trusts local connections; PgBouncer still wants the user in its auth_file.
auth_type = trust
auth_file = ${join(dir, 'userlist.txt')}
admin_users = ${new URL(ADMIN_URL).username || 'postgres'}
; A client that waits this long for a server connection gets an error instead of hanging.
query_wait_timeout = 10
server_login_retry = 1
`
}

function ownedByPostgres(dir: string): string[] {
  if (process.getuid?.() !== 0) return []
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim())
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim())
  chownSync(dir, uid, gid)
  return ['-u', 'postgres']
}

async function waitUntilServing(url: string, child: ChildProcess, log: () => string) {
  const deadline = Date.now() + 10_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`pgbouncer exited:\n${log()}`)
    const client = new Client({ connectionString: url, connectionTimeoutMillis: 1_000 })
    client.on('error', () => {})
    try {
      await client.connect()
      await client.query('SHOW VERSION')
      return
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`pgbouncer did not answer: ${err}\n${log()}`)
    } finally {
      await client.end().catch(() => {})
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** Tries before a start that lost its port to another process counts as failed. */
const START_TRIES = 3

/**
 * Starts a private PgBouncer. The port is free when chosen but is bound only by PgBouncer, so
 * another process may take it in between (the test runs go on at once): such a start is retried
 * on another port.
 */
export async function startPgBouncer(options: PgBouncerOptions): Promise<PgBouncer> {
  const binary = pgbouncerBinary()
  if (binary === undefined) throw new Error(absentLine())
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(binary, options)
    } catch (err) {
      const portTaken = err instanceof Error && /address already in use/i.test(err.message)
      if (!portTaken || attempt === START_TRIES) throw err
    }
  }
}

async function startOnce(binary: string, options: PgBouncerOptions): Promise<PgBouncer> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-pgbouncer-'))
  const port = await freePort()
  const user = new URL(ADMIN_URL).username || 'postgres'
  writeFileSync(join(dir, 'userlist.txt'), `"${user}" ""\n`)
  const ini = join(dir, 'pgbouncer.ini')
  writeFileSync(ini, config(dir, port, options))
  const asPostgres = ownedByPostgres(dir)
  let stderr = ''
  const spawnPooler = () => {
    const child = spawn(binary, [...asPostgres, ini], {
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    child.stderr?.on('data', (chunk) => {
      // Bounded: a long run logs every connection.
      stderr = (stderr + chunk).slice(-64_000)
    })
    return { child, exited: once(child, 'exit') }
  }
  let running = spawnPooler()
  const through = (url: string) => {
    const parsed = new URL(url)
    parsed.hostname = '127.0.0.1'
    parsed.port = String(port)
    return parsed.toString()
  }
  const kill = async (signal: NodeJS.Signals = 'SIGKILL') => {
    const { child, exited } = running
    if (child.exitCode === null && child.signalCode === null) child.kill(signal)
    await exited
  }
  const adminUrl = through(`postgres://${user}@x/pgbouncer`)
  const stop = async () => {
    await kill('SIGTERM')
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    await waitUntilServing(adminUrl, running.child, () => stderr)
  } catch (err) {
    await stop()
    throw err
  }
  return {
    port,
    urlFor: (database) => through(`postgres://${user}@x/${database}`),
    through,
    log: () => stderr,
    kill,
    async restart() {
      await kill()
      running = spawnPooler()
      await waitUntilServing(adminUrl, running.child, () => stderr)
    },
    stop,
  }
}
