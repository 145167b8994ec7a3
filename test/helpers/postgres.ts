// Shared PostgreSQL setup for tests: whether a server is reachable, and a fresh database per
// use (created on the server, dropped afterwards), so runs never see each other's rows.

import { randomBytes } from 'node:crypto'
import { Client } from 'pg'

/** The server the tests use; trust auth on these machines. Override for another server. */
export const ADMIN_URL =
  process.env.PETSTORE_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

/**
 * D19: test/run.ts's PgBouncer run sets this to a transaction-mode PgBouncer's host:port. Test
 * databases are then created and dropped on the server itself, and reached through the pooler.
 */
const POOLER_ADDRESS = process.env.PETSTORE_TEST_PGBOUNCER

/** The DATABASE_POOLER services and stores in tests use: what stands between them and the server. */
export const TEST_POOLER: 'none' | 'transaction' =
  POOLER_ADDRESS === undefined || POOLER_ADDRESS === '' ? 'none' : 'transaction'

/** CI sets this: an unreachable PostgreSQL then fails the run instead of skipping its tests. */
export const POSTGRES_REQUIRED = process.env.PETSTORE_REQUIRE_POSTGRES === '1'

/** host:port of ADMIN_URL, never its password. */
function where(): string {
  const url = new URL(ADMIN_URL)
  return `${url.hostname}:${url.port || '5432'}`
}

/** The one line printed where PostgreSQL is absent. */
export function unreachableLine(): string {
  return `PostgreSQL is not reachable at ${where()}; the PostgreSQL tests are skipped`
}

/** Runs `work` on a connection of its own to `url`, as psql would. */
export async function onDatabase<T>(url: string, work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 3_000 })
  // Errors reach the awaiting call; the listener keeps a dropped connection from throwing.
  client.on('error', () => {})
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end().catch(() => {})
  }
}

export async function postgresReachable(): Promise<boolean> {
  try {
    await onDatabase(ADMIN_URL, (client) => client.query('SELECT 1'))
    return true
  } catch {
    return false
  }
}

/**
 * For a file whose tests all need PostgreSQL: undefined when it is reachable, else the reason to
 * skip them. Throws when PETSTORE_REQUIRE_POSTGRES=1, so that a missing server fails CI.
 */
export async function postgresSkipReason(): Promise<string | undefined> {
  if (await postgresReachable()) return undefined
  if (POSTGRES_REQUIRED) throw new Error(`${unreachableLine()}, but PETSTORE_REQUIRE_POSTGRES=1`)
  return unreachableLine()
}

export interface TestDatabase {
  name: string
  /** ADMIN_URL pointing at this database; through the pooler in the PgBouncer run. */
  url: string
  /** DATABASE_POOLER for a service on `url`. */
  pooler: 'none' | 'transaction'
  /** Drops the database, ending any connection still open to it. */
  drop(): Promise<void>
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `petstore_test_${randomBytes(6).toString('hex')}`
  await onDatabase(ADMIN_URL, (client) => client.query(`CREATE DATABASE ${name}`))
  const url = new URL(ADMIN_URL)
  url.pathname = `/${name}`
  if (TEST_POOLER === 'transaction') url.host = POOLER_ADDRESS as string
  return {
    name,
    url: url.toString(),
    pooler: TEST_POOLER,
    // Straight to the server; FORCE also ends the connections the pooler still holds.
    drop: async () => {
      await onDatabase(ADMIN_URL, (client) =>
        client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
      )
    },
  }
}
