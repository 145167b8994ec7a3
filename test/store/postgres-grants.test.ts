// D27: the runtime role of deploy/postgresql/grants.sql, the file docs/operations.md
// (Migrations) tells an operator to run. Two roles on a new database, as the docs set them up:
// the owner migrates (`petstore migrate`) and runs the file as psql would; the service then runs
// as the runtime role with PETSTORE_MIGRATE=off and does all it does (creates, keyed creates,
// lists, gets, keys made and revoked, the purge of expired records), while a write to the
// migration ledger or to the environment record is refused: such a row in the ledger stopped
// every instance at its next start.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { openPostgresStore } from '../../src/store/postgres/store.ts'
import {
  ADMIN_URL,
  createTestDatabase,
  onDatabase,
  postgresSkipReason,
} from '../helpers/postgres.ts'
import { runCli, type ServiceProcess, startService } from '../helpers/process.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const GRANTS = join(ROOT, 'deploy', 'postgresql', 'grants.sql')
/** SQLSTATE insufficient_privilege. */
const PERMISSION_DENIED = '42501'

/** psql's `:"name"`: the variable's value as a quoted identifier. */
function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}

/**
 * The file as `psql -v name=value -f` runs it: each `:"name"` becomes that value, quoted as an
 * identifier. A variable the file uses and the command does not give fails, as it would in psql
 * (`:"runtime"` left as it is is a syntax error there).
 */
export function asPsqlRuns(sql: string, variables: Record<string, string>): string {
  return sql.replace(/:"(\w+)"/g, (_, name: string) => {
    const value = variables[name]
    assert.ok(value !== undefined, `the file uses :"${name}", which the command does not give`)
    return quoteIdentifier(value)
  })
}

/** ADMIN_URL's server, as `role`, on `database`: straight to the server, never a pooler. */
function urlAs(role: string, database: string): string {
  const url = new URL(ADMIN_URL)
  url.username = role
  url.password = ''
  url.pathname = `/${database}`
  return url.toString()
}

/** The SQLSTATE a statement run as `url`'s role fails with; undefined when it succeeds. */
async function refusal(url: string, sql: string): Promise<string | undefined> {
  return onDatabase(url, async (client) => {
    try {
      await client.query(sql)
      return undefined
    } catch (error) {
      return (error as { code?: string }).code
    }
  })
}

test('docs/operations.md runs the file as this test does: psql, as the owner, giving `runtime`', () => {
  const docs = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8')
  assert.ok(
    docs.includes(
      'psql "$OWNER_DATABASE_URL" -v ON_ERROR_STOP=1 -v runtime=petstore -f deploy/postgresql/grants.sql',
    ),
  )
  // Every variable the file uses is one the command gives.
  const used = new Set([...readFileSync(GRANTS, 'utf8').matchAll(/:"(\w+)"/g)].map(([, n]) => n))
  assert.deepEqual([...used], ['runtime'])
})

const skip = await postgresSkipReason()

describe('PostgreSQL: the runtime role of deploy/postgresql/grants.sql (D27)', { skip }, () => {
  // Roles are the server's, not the database's: names of this run's own, dropped at the end.
  const suffix = randomBytes(4).toString('hex')
  const owner = `petstore_owner_${suffix}`
  const runtime = `petstore_${suffix}`
  let database: Awaited<ReturnType<typeof createTestDatabase>>
  let ownerUrl: string
  let runtimeUrl: string
  let serving: { env: Record<string, string>; key: string }

  before(async () => {
    database = await createTestDatabase()
    // As docs/operations.md says: two roles, the owner's database.
    await onDatabase(ADMIN_URL, async (client) => {
      await client.query(`CREATE ROLE ${quoteIdentifier(owner)} LOGIN`)
      await client.query(`CREATE ROLE ${quoteIdentifier(runtime)} LOGIN`)
      await client.query(`ALTER DATABASE ${database.name} OWNER TO ${quoteIdentifier(owner)}`)
    })
    ownerUrl = urlAs(owner, database.name)
    runtimeUrl = urlAs(runtime, database.name)
    const migrate = await runCli(['migrate'], { DATABASE_URL: ownerUrl })
    assert.equal(migrate.code, 0, migrate.stderr)
    const grants = asPsqlRuns(readFileSync(GRANTS, 'utf8'), { runtime })
    await onDatabase(ownerUrl, (client) => client.query(grants))
    const env = { DATABASE_URL: runtimeUrl, PETSTORE_MIGRATE: 'off' }
    const made = await runCli(['keys', 'create', '--name', 'runtime'], env)
    assert.equal(made.code, 0, made.stderr)
    serving = { env, key: made.stdout.trim() }
  })

  after(async () => {
    await database?.drop()
    await onDatabase(ADMIN_URL, async (client) => {
      await client.query(`DROP ROLE IF EXISTS ${quoteIdentifier(runtime)}`)
      await client.query(`DROP ROLE IF EXISTS ${quoteIdentifier(owner)}`)
    })
  })

  /** `petstore serve` as the runtime role; stopped, and drained with exit 0, after `work`. */
  async function serve(work: (service: ServiceProcess) => Promise<void>): Promise<void> {
    const service = await startService(serving.env)
    try {
      await work(service)
    } finally {
      assert.equal(await service.stop(), 0, service.stderr())
    }
  }

  test('the service serves as the runtime role: readiness, creates, keyed creates, lists, gets', async () => {
    await serve(async (service) => {
      const headers = { authorization: `Bearer ${serving.key}`, 'content-type': 'application/json' }
      assert.equal((await fetch(`${service.url}/readyz`)).status, 200)
      const create = (body: object, extra: Record<string, string> = {}) =>
        fetch(`${service.url}/v1/pets`, {
          method: 'POST',
          headers: { ...headers, ...extra },
          body: JSON.stringify(body),
        })
      const plain = await create({ name: 'Rex', categoryId: 1 })
      assert.equal(plain.status, 201, await plain.clone().text())
      const { id } = (await plain.json()) as { id: number }
      const keyed = { 'idempotency-key': 'grants-1' }
      const first = await create({ name: 'Tom', categoryId: 2, status: 'available' }, keyed)
      assert.equal(first.status, 201, await first.clone().text())
      const again = await create({ name: 'Tom', categoryId: 2, status: 'available' }, keyed)
      assert.equal(again.status, 201)
      assert.deepEqual(await again.json(), await first.json(), 'the keyed create replayed')
      const list = await fetch(`${service.url}/v1/pets`, { headers })
      assert.equal(list.status, 200)
      assert.equal(((await list.json()) as unknown[]).length, 2)
      const get = await fetch(`${service.url}/v1/pets/${id}`, { headers })
      assert.equal(get.status, 200)
    })
  })

  test('the keys commands and the purge of expired Idempotency-Key records, as the runtime role', async () => {
    const made = await runCli(['keys', 'create', '--name', 'to revoke'], serving.env)
    assert.equal(made.code, 0, made.stderr)
    const id = /Created (key_\w+)/.exec(made.stderr)?.[1]
    assert.ok(id, made.stderr)
    const revoked = await runCli(['keys', 'revoke', id], serving.env)
    assert.equal(revoked.code, 0, revoked.stderr)
    const listed = await runCli(['keys', 'list', '--json'], serving.env)
    assert.equal(listed.code, 0, listed.stderr)
    const keys = JSON.parse(listed.stdout) as { id: string; state: string }[]
    assert.equal(keys.find((key) => key.id === id)?.state, 'revoked')
    // The service purges every minute (src/store/idempotency-purge.ts); its statement, at once.
    const store = openPostgresStore({ url: runtimeUrl, poolSize: 1 })
    try {
      const purged = await store.pets.purgeIdempotencyRecords(
        new Date(Date.now() + 86_400_000),
        500,
      )
      assert.ok(purged >= 1, 'the keyed create’s record purged')
    } finally {
      await store.close()
    }
  })

  test('the runtime role cannot write the migration ledger or the environment record', async () => {
    // The review's row: as a newer release's contract step, it would stop every instance.
    assert.equal(
      await refusal(runtimeUrl, "INSERT INTO schema_migrations VALUES (99, 'x', now(), false)"),
      PERMISSION_DENIED,
    )
    assert.equal(
      await refusal(runtimeUrl, "UPDATE database_environment SET environment = 'staging'"),
      PERMISSION_DENIED,
    )
    for (const sql of [
      'DELETE FROM schema_migrations',
      'DELETE FROM database_environment',
      'TRUNCATE schema_migrations',
      'TRUNCATE pets',
      'CREATE TABLE petstore_extra (id integer)',
    ]) {
      assert.equal(await refusal(runtimeUrl, sql), PERMISSION_DENIED, sql)
    }
    // And the next start serves as before.
    await serve(async (service) => {
      assert.equal((await fetch(`${service.url}/readyz`)).status, 200)
    })
    const recorded = await onDatabase(ownerUrl, (client) =>
      client.query('SELECT environment FROM database_environment'),
    )
    assert.deepEqual(recorded.rows, [{ environment: 'production' }])
  })
})
