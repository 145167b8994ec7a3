// A private PostgreSQL primary and a streaming replica with synchronous replication, for the
// fleet harness: initdb, then pg_basebackup from the primary, in a temp folder, on free ports,
// run as the `postgres` user (PostgreSQL refuses to run as root). With
// `synchronous_standby_names` naming the replica and `synchronous_commit = on`, the primary
// acknowledges a commit only once the replica has it on disk, so a commit the service
// acknowledged survives the primary's loss (docs/fleet.md: replication).
//
// failover() is what an operator does when the primary is gone: stop it immediately (it never
// comes back), promote the replica, and let the new primary commit alone (it has no standby to
// wait for until a new replica is built).
import { type ExecFileSyncOptions, execFileSync } from 'node:child_process'
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from '../../test/helpers/free-port.ts'
import { onDatabase } from '../../test/helpers/postgres.ts'

/** Debian's PostgreSQL 15 server programs, unless PETSTORE_PG_BIN names another folder. */
export const PG_BIN = process.env.PETSTORE_PG_BIN ?? '/usr/lib/postgresql/15/bin'

/** The standby's name, as the primary's synchronous_standby_names lists it. */
const STANDBY_NAME = 'replica1'

export interface Server {
  port: number
  /** postgres://postgres@127.0.0.1:port/postgres */
  url(database?: string): string
}

export interface PostgresPair {
  primary: Server
  replica: Server
  /** The replica's state as the primary reports it: 'sync' once it confirms every commit. */
  syncState(): Promise<string | undefined>
  /** Stops the primary at once (`-m immediate`), promotes the replica; resolves when it takes writes. */
  failover(): Promise<{ promotedMs: number }>
  stop(): Promise<void>
}

function asRoot(): boolean {
  return process.getuid?.() === 0
}

/** Runs a PostgreSQL program as the `postgres` user when we are root, else as ourselves. */
function pg(program: string, args: string[], options: ExecFileSyncOptions = {}): string {
  const binary = join(PG_BIN, program)
  const [file, argv] = asRoot()
    ? ['runuser', ['-u', 'postgres', '--', binary, ...args]]
    : [binary, args]
  return String(execFileSync(file, argv, { stdio: ['ignore', 'pipe', 'pipe'], ...options }))
}

function ownByPostgres(path: string): void {
  if (!asRoot()) return
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim())
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim())
  chownSync(path, uid, gid)
}

function server(port: number): Server {
  return {
    port,
    url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
  }
}

/** The primary's settings beyond initdb's: what replication and a fleet's connections need. */
function primaryConf(port: number): string {
  return `
listen_addresses = '127.0.0.1'
port = ${port}
unix_socket_directories = ''
max_connections = 200
wal_level = replica
max_wal_senders = 5
wal_keep_size = '256MB'
synchronous_commit = on
synchronous_standby_names = 'FIRST 1 (${STANDBY_NAME})'
fsync = on
`
}

async function waitForQuery(url: string, sql: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      await onDatabase(url, (client) => client.query(sql))
      return
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`${url} did not answer ${sql}: ${err}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

async function query<T extends object>(url: string, sql: string): Promise<T[]> {
  return onDatabase(url, async (client) => (await client.query<T>(sql)).rows)
}

async function replicaSyncState(primary: Server): Promise<string | undefined> {
  const rows = await query<{ sync_state: string }>(
    primary.url(),
    `SELECT sync_state FROM pg_stat_replication WHERE application_name = '${STANDBY_NAME}'`,
  )
  return rows[0]?.sync_state
}

/** Stops the server in `data` at once (`-m immediate`); nothing if it is not running. */
function stopServer(data: string): void {
  try {
    pg('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop'])
  } catch {
    // Not running.
  }
}

/** initdb, the primary started, the base backup, the replica started and synchronous. */
async function initialise(
  dir: string,
  primaryDir: string,
  replicaDir: string,
  primary: Server,
  replica: Server,
): Promise<void> {
  pg('initdb', ['-D', primaryDir, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8'])
  const conf = join(primaryDir, 'postgresql.auto.conf')
  writeFileSync(conf, primaryConf(primary.port))
  ownByPostgres(conf)
  const hba = join(primaryDir, 'pg_hba.conf')
  writeFileSync(hba, 'host all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n')
  ownByPostgres(hba)
  pg('pg_ctl', ['-D', primaryDir, '-l', join(dir, 'primary.log'), '-w', 'start'])
  await waitForQuery(primary.url(), 'SELECT 1')

  // -R writes primary_conninfo and standby.signal; application_name is how the primary knows it.
  pg('pg_basebackup', [
    '-D',
    replicaDir,
    '-R',
    '-X',
    'stream',
    '-d',
    `host=127.0.0.1 port=${primary.port} user=postgres application_name=${STANDBY_NAME}`,
  ])
  const replicaConf = join(replicaDir, 'postgresql.auto.conf')
  // The copied settings, with the replica's own port; primary_conninfo as -R appended it.
  const copied = readFileSync(replicaConf, 'utf8')
  writeFileSync(replicaConf, `${copied.replace(/^port = \d+$/m, `port = ${replica.port}`)}\n`)
  ownByPostgres(replicaConf)
  pg('pg_ctl', ['-D', replicaDir, '-l', join(dir, 'replica.log'), '-w', 'start'])
  await waitForQuery(replica.url(), 'SELECT 1')

  const deadline = Date.now() + 20_000
  while ((await replicaSyncState(primary)) !== 'sync') {
    if (Date.now() > deadline) throw new Error('the replica did not become synchronous')
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

export async function startPostgresPair(): Promise<PostgresPair> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-fleet-pg-'))
  ownByPostgres(dir)
  const primaryDir = join(dir, 'primary')
  const replicaDir = join(dir, 'replica')
  const primary = server(await freePort())
  const replica = server(await freePort())

  try {
    await initialise(dir, primaryDir, replicaDir, primary, replica)
  } catch (err) {
    // Whatever started is stopped; nothing is left behind.
    for (const data of [replicaDir, primaryDir]) stopServer(data)
    rmSync(dir, { recursive: true, force: true })
    throw err
  }
  const syncState = () => replicaSyncState(primary)

  let primaryRunning = true
  let replicaRunning = true
  return {
    primary,
    replica,
    syncState,
    async failover() {
      stopServer(primaryDir)
      primaryRunning = false
      const started = performance.now()
      pg('pg_ctl', ['-D', replicaDir, '-w', 'promote'])
      // Alone now: a commit must not wait for a standby that does not exist yet.
      await query(replica.url(), `ALTER SYSTEM SET synchronous_standby_names = ''`)
      await query(replica.url(), 'SELECT pg_reload_conf()')
      await waitForQuery(replica.url(), 'CREATE TEMP TABLE promoted (x int)')
      return { promotedMs: performance.now() - started }
    },
    async stop() {
      if (primaryRunning) stopServer(primaryDir)
      if (replicaRunning) stopServer(replicaDir)
      primaryRunning = false
      replicaRunning = false
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
