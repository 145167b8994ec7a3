// D27: releases that know their schema. What `petstore migrate`, `migrate --status`, the other
// commands and `serve` do with a database that lacks migrations (PETSTORE_MIGRATE=off) or holds
// a newer release's: an expand step is served and said once, a contract step is refused in one
// line, changing nothing. The store contract (test/store/contract.ts) holds the same on every
// engine; test/upgrade/upgrade.ts (npm run test:upgrade) runs the previous release beside this one.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { after, before, describe, test } from 'node:test'
import { generateApiKey } from '../src/contract/api-key.ts'
import { sqliteMigrations } from '../src/store/sqlite/migrations.ts'
import { runMain } from './helpers/in-process.ts'
import { sqliteLedger } from './helpers/ledger.ts'
import { logLines } from './helpers/logs.ts'
import { runCli, startService } from './helpers/process.ts'
import { tempDir } from './helpers/server.ts'

const VERSIONS = sqliteMigrations.map((migration) => migration.version)
const LATEST = Math.max(...VERSIONS)

/** The ledger's rows as they are in the file: version and what each says of older releases. */
function ledger(path: string): { version: number; mayServe: number }[] {
  const db = new DatabaseSync(path, { readOnly: true })
  try {
    return db
      .prepare(
        'SELECT version, older_releases_may_serve AS mayServe FROM schema_migrations ORDER BY version',
      )
      .all()
      .map((row) => ({ version: Number(row.version), mayServe: Number(row.mayServe) }))
  } finally {
    db.close()
  }
}

describe('migrations as a step of their own (D27)', () => {
  let dir: Awaited<ReturnType<typeof tempDir>>
  let env: Record<string, string>
  let path: string

  before(async () => {
    dir = await tempDir()
    path = join(dir.path, 'steps.db')
    env = { DATABASE_URL: `sqlite:${path}`, PETSTORE_MIGRATE: 'off' }
  })
  after(() => dir.remove())

  test('migrate --status on a new database: every migration pending, exit 1, nothing applied', async () => {
    const status = await runMain(['migrate', '--status'], env)
    assert.equal(status.code, 1)
    for (const version of VERSIONS) {
      assert.match(status.stdout, new RegExp(`^${version} .* pending$`, 'm'))
    }
    const lines = status.stderr.trim().split('\n')
    assert.equal(lines.length, 1, status.stderr)
    assert.match(
      lines[0] ?? '',
      /migrations are pending: 1 \(pets and api keys\), .*petstore migrate/,
    )
  })

  test('with PETSTORE_MIGRATE=off, the other commands refuse it in one line, naming migrate', async () => {
    const keys = await runMain(['keys', 'list'], env)
    assert.equal(keys.code, 1)
    assert.equal(keys.stderr.trim().split('\n').length, 1, keys.stderr)
    assert.match(
      keys.stderr,
      new RegExp(
        `lacks ${VERSIONS.length} migrations this release needs: 1 \\(pets and api keys\\)`,
      ),
    )
    assert.match(keys.stderr, /Run "petstore migrate" first \(PETSTORE_MIGRATE=off/)
    // A process of its own: were the refusal to break, serve would listen, not hang this file.
    const serve = await runCli(['serve'], { ...env, PORT: '0' })
    assert.equal(serve.code, 1)
    assert.match(
      serve.stderr,
      new RegExp(`^petstore: the database lacks ${VERSIONS.length} migrations`),
    )
  })

  test('migrate applies them whatever PETSTORE_MIGRATE says: one line each, then up to date', async () => {
    const first = await runMain(['migrate'], env)
    assert.equal(first.code, 0, first.stderr)
    const lines = first.stdout.trim().split('\n')
    assert.equal(lines.length, VERSIONS.length)
    for (const [i, version] of VERSIONS.entries()) {
      assert.match(
        lines[i] ?? '',
        new RegExp(`^Applied migration ${version} \\(.+\\) in \\d+ ms\\.$`),
      )
    }
    assert.deepEqual((await runMain(['migrate'], env)).stdout, 'The database is up to date.\n')
    const status = await runMain(['migrate', '--status'], env)
    assert.equal(status.code, 0, status.stderr)
    assert.equal(status.stdout.match(/ applied$/gm)?.length, VERSIONS.length)
    // Idempotency-Key's migration changed what a create means: older releases must not serve.
    assert.deepEqual(
      ledger(path)
        .filter((row) => row.mayServe === 0)
        .map((row) => row.version),
      [3],
    )
    assert.equal((await runMain(['keys', 'list'], env)).code, 0)
  })
})

describe("a newer release's migrations (D27)", () => {
  let dir: Awaited<ReturnType<typeof tempDir>>
  let env: Record<string, string>
  let path: string

  before(async () => {
    dir = await tempDir()
    path = join(dir.path, 'newer.db')
    env = { DATABASE_URL: `sqlite:${path}`, PETSTORE_API_KEYS: generateApiKey('production') }
    assert.equal((await runMain(['migrate'], env)).code, 0)
  })
  after(() => dir.remove())

  test('an expand step: serve starts and says so once, naming it', async () => {
    await sqliteLedger(path).add({
      version: LATEST + 1,
      name: 'a table of the future',
      olderReleasesMayServe: true,
    })
    const service = await startService(env)
    try {
      const said = logLines(service.stdout()).filter((line) =>
        String(line.msg).includes('of a newer release'),
      )
      assert.equal(said.length, 1, service.stdout())
      assert.match(
        String(said[0]?.msg),
        new RegExp(
          `${LATEST + 1} \\(a table of the future\\).*may keep serving.*this release serves`,
        ),
      )
      const response = await fetch(`${service.url}/readyz`)
      assert.equal(response.status, 200)
    } finally {
      assert.equal(await service.stop(), 0)
    }
    const status = await runMain(['migrate', '--status'], env)
    assert.equal(status.code, 0)
    assert.match(status.stdout, /applied by a newer release; this release may serve it$/m)
  })

  test('a contract step: serve, migrate and keys refuse in one line, exit 1, changing nothing', async () => {
    await sqliteLedger(path).add({
      version: LATEST + 2,
      name: 'a dropped column',
      olderReleasesMayServe: false,
    })
    const before = ledger(path)
    const serve = await runCli(['serve'], { ...env, PORT: '0' })
    assert.equal(serve.code, 1)
    const lines = serve.stderr.trim().split('\n')
    assert.equal(lines.length, 1, serve.stderr)
    assert.match(lines[0] ?? '', new RegExp(`^petstore: .*${LATEST + 2} \\(a dropped column\\)`))
    assert.match(
      lines[0] ?? '',
      new RegExp(`this release knows versions ${VERSIONS.join(', ')}\\.`),
    )
    assert.match(lines[0] ?? '', /Upgrade this instance .*, or restore the database/)
    assert.equal(serve.stdout.includes('Server listening'), false)
    for (const args of [['migrate'], ['keys', 'list'], ['migrate', '--status']]) {
      const refused = await runMain(args, env)
      assert.equal(refused.code, 1, args.join(' '))
      assert.match(refused.stderr, /must not serve: \d+ \(a dropped column\)/)
    }
    assert.deepEqual(ledger(path), before)
  })

  test('issue 53: a name read from the ledger is printed escaped, as JSON escapes it: no forged line, no terminal escape', async () => {
    const forged = 'x\nINJECTED LINE \u001b[31mred\u001b[0m \u202eevil\r'
    await sqliteLedger(path).add({
      version: LATEST + 3,
      name: forged,
      olderReleasesMayServe: false,
    })
    const holdsActive = (text: string) => ['\u001b', '\u202e', '\r'].some((c) => text.includes(c))
    const escaped = 'x\\nINJECTED LINE \\u001b[31mred\\u001b[0m \\u202eevil\\r'
    for (const args of [['migrate'], ['keys', 'list'], ['migrate', '--status']]) {
      const refused = await runMain(args, env)
      assert.equal(refused.code, 1, args.join(' '))
      for (const output of [refused.stdout, refused.stderr]) {
        assert.equal(holdsActive(output), false, `${args.join(' ')}: ${output}`)
        assert.equal(output.includes('INJECTED LINE') && /^INJECTED/m.test(output), false)
      }
      assert.equal(refused.stderr.trim().split('\n').length, 1, refused.stderr)
      assert.ok(refused.stderr.includes(`${LATEST + 3} (${escaped})`), refused.stderr)
    }
    const status = await runMain(['migrate', '--status'], env)
    assert.match(
      status.stdout,
      new RegExp(`^${LATEST + 3} +x\\\\nINJECTED LINE \\\\u001b\\[31m`, 'm'),
    )
    const db = new DatabaseSync(path)
    try {
      db.prepare(`DELETE FROM schema_migrations WHERE version > ${LATEST}`).run()
      db.prepare(
        "INSERT INTO api_keys (id, name, hint, hash, created_at) VALUES ('key_forged00000', ?, 'h', 'x', ?)",
      ).run(forged, new Date().toISOString())
    } finally {
      db.close()
    }
    const keys = await runMain(['keys', 'list'], env)
    assert.equal(keys.code, 0, keys.stderr)
    assert.equal(holdsActive(keys.stdout), false, keys.stdout)
    assert.ok(keys.stdout.includes(escaped), keys.stdout)
  })
})
