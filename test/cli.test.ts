// The `petstore` command as an operator runs it: a real process, a real SQLite file.
import assert from 'node:assert/strict'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { runCli, startService } from './helpers/process.ts'
import { tempDir } from './helpers/server.ts'

describe('petstore CLI', () => {
  let dir: Awaited<ReturnType<typeof tempDir>>
  let env: Record<string, string>

  before(async () => {
    dir = await tempDir()
    env = { DATABASE_URL: `sqlite:${join(dir.path, 'cli.db')}`, LOG_LEVEL: 'warn' }
  })
  after(() => dir.remove())

  test('migrate applies the schema once', async () => {
    const first = await runCli(['migrate'], env)
    assert.equal(first.code, 0, first.stderr)
    assert.match(first.stdout, /Applied migrations: 1, 2\./)
    const second = await runCli(['migrate'], env)
    assert.equal(second.code, 0)
    assert.match(second.stdout, /up to date/)
  })

  test('keys create prints the key once; it works on all three operations; revoke stops it', async () => {
    const created = await runCli(['keys', 'create', '--name', 'ops team'], env)
    assert.equal(created.code, 0, created.stderr)
    const key = created.stdout.trim()
    assert.match(key, /^petstore_live_[0-9A-Za-z]{38}$/)
    const id = /Created (key_[0-9A-Za-z]+)/.exec(created.stderr)?.[1]
    assert.ok(id, created.stderr)

    const listed = await runCli(['keys', 'list'], env)
    assert.equal(listed.code, 0)
    assert.match(listed.stdout, new RegExp(`${id}\\s+ops team\\s+petstore_live_…${key.slice(-4)}`))
    assert.ok(!listed.stdout.includes(key), 'keys list never shows a key')

    const service = await startService(env)
    try {
      const auth = { authorization: `Bearer ${key}` }
      const made = await fetch(`${service.url}/v1/pets`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Rex', categoryId: 3 }),
      })
      assert.equal(made.status, 201)
      const pet = (await made.json()) as { id: number }
      assert.equal((await fetch(`${service.url}/v1/pets`, { headers: auth })).status, 200)
      assert.equal((await fetch(`${service.url}/v1/pets/${pet.id}`, { headers: auth })).status, 200)

      const revoked = await runCli(['keys', 'revoke', id], env)
      assert.equal(revoked.code, 0, revoked.stderr)
      assert.equal((await fetch(`${service.url}/v1/pets`, { headers: auth })).status, 401)
    } finally {
      assert.equal(await service.stop(), 0)
    }
    const again = await runCli(['keys', 'revoke', id], env)
    assert.equal(again.code, 2)
    assert.match(again.stderr, /no active key/)
    assert.match((await runCli(['keys', 'list', '--json'], env)).stdout, /"revokedAt"/)
  })

  test('backup copies the live database; a service on the copy has every pet and key', async () => {
    const created = await runCli(['keys', 'create', '--name', 'backup check'], env)
    const key = created.stdout.trim()
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
    const service = await startService(env)
    const copy = join(dir.path, 'copy.db')
    let made: { id: number; name: string }[]
    try {
      const create = async (i: number) => {
        const response = await fetch(`${service.url}/v1/pets`, {
          method: 'POST',
          headers: auth,
          body: JSON.stringify({ name: `backed up ${i}`, categoryId: 7 }),
        })
        assert.equal(response.status, 201)
        return (await response.json()) as { id: number; name: string }
      }
      made = await Promise.all(Array.from({ length: 50 }, (_, i) => create(i)))
      // Taken while the service has the file open, with more creates on their way.
      const writing = Promise.all(Array.from({ length: 50 }, (_, i) => create(50 + i)))
      const result = await runCli(['backup', copy], env)
      await writing
      assert.equal(result.code, 0, result.stderr)
      assert.match(result.stdout, /^Backed up .* to .*copy\.db \(\d+ pages\)\.$/m)
    } finally {
      assert.equal(await service.stop(), 0)
    }

    const restored = await startService({ ...env, DATABASE_URL: `sqlite:${copy}` })
    try {
      for (const pet of made) {
        const response = await fetch(`${restored.url}/v1/pets/${pet.id}`, { headers: auth })
        assert.equal(response.status, 200, 'the key and every pet acknowledged before the backup')
        assert.equal(((await response.json()) as { name: string }).name, pet.name)
      }
    } finally {
      assert.equal(await restored.stop(), 0)
    }

    const again = await runCli(['backup', copy], env)
    assert.equal(again.code, 1)
    assert.match(again.stderr, /^petstore: backup failed: .*copy\.db exists already/)
    const onPostgres = await runCli(['backup', join(dir.path, 'pg.db')], {
      ...env,
      DATABASE_URL: 'postgres://petstore@127.0.0.1:5432/petstore',
    })
    assert.equal(onPostgres.code, 1)
    assert.match(onPostgres.stderr, /pg_dump/)
    const noTarget = await runCli(['backup'], env)
    assert.equal(noTarget.code, 2)
    assert.match(noTarget.stderr, /Usage: petstore/)
  })

  test('a staging service issues staging keys', async () => {
    const created = await runCli(['keys', 'create', '--name', 'stage'], {
      ...env,
      PETSTORE_ENV: 'staging',
    })
    assert.match(created.stdout.trim(), /^petstore_staging_/)
  })

  test('--help after any command prints the usage and exits 0; no command at all exits 2', async () => {
    for (const args of [['--help'], ['help'], ['keys', '--help'], ['serve', '-h']]) {
      const result = await runCli(args, env)
      assert.equal(result.code, 0, args.join(' '))
      assert.match(result.stdout, /^Usage: petstore/, args.join(' '))
    }
    const bare = await runCli([], env)
    assert.equal(bare.code, 2)
    assert.match(bare.stderr, /^Usage: petstore/)
  })

  test('usage errors exit 2 with the usage text', async () => {
    const missing = await runCli(['keys', 'create'], env)
    assert.equal(missing.code, 2)
    assert.match(missing.stderr, /--name NAME/)
    const unknown = await runCli(['frobnicate'], env)
    assert.equal(unknown.code, 2)
    assert.match(unknown.stderr, /Usage: petstore/)
  })

  test('a database that cannot be opened or reached stops the start with one line, exit 1', async () => {
    const notADatabase = join(dir.path, 'not-a-database.db')
    await writeFile(notADatabase, 'these bytes are not a SQLite database, not even its header')
    for (const [url, expected] of [
      [
        `sqlite:${notADatabase}`,
        /^petstore: cannot open the SQLite database .*\(file is not a database\)$/,
      ],
      [
        'postgres://petstore@127.0.0.1:1/petstore',
        /^petstore: the PostgreSQL database is unreachable \(.+\)$/,
      ],
    ] as const) {
      for (const args of [['serve'], ['migrate'], ['serve', '--workers', '2']]) {
        const result = await runCli(args, { ...env, DATABASE_URL: url })
        assert.equal(result.code, 1, `${args.join(' ')} on ${url}`)
        const lines = result.stderr.trim().split('\n')
        assert.equal(lines.length, 1, result.stderr)
        assert.match(lines[0] ?? '', expected)
      }
    }
  })

  test('--workers refuses an in-memory database, which its processes cannot share', async () => {
    const result = await runCli(['serve', '--workers', '2'], {
      ...env,
      DATABASE_URL: 'sqlite::memory:',
    })
    assert.equal(result.code, 2)
    assert.match(result.stderr, /^petstore: --workers needs a database its processes share/)
  })

  for (const [name, value, expected] of [
    ['PORT', 'abc', /PORT must be an integer from 0 to 65535/],
    ['DATABASE_URL', 'mysql://x', /DATABASE_URL must be/],
    ['PETSTORE_ENV', 'prod', /PETSTORE_ENV must be one of production, staging/],
    ['PETSTORE_RATE_LIMIT', '-1', /PETSTORE_RATE_LIMIT must be an integer/],
    ['LOG_LEVEL', 'loud', /LOG_LEVEL must be one of/],
    ['PETSTORE_API_KEYS', 'short', /PETSTORE_API_KEYS entry 1 must be at least 32 characters/],
    ['PETSTORE_CORS_ORIGINS', 'example.com', /PETSTORE_CORS_ORIGINS entry/],
  ] as const) {
    test(`a bad ${name} stops the start with one line and exit code 1`, async () => {
      const result = await runCli(['serve'], { ...env, [name]: value })
      assert.equal(result.code, 1)
      const lines = result.stderr.trim().split('\n')
      assert.equal(lines.length, 1, result.stderr)
      assert.match(lines[0] ?? '', /^petstore: invalid configuration: /)
      assert.match(lines[0] ?? '', expected)
    })
  }
})
