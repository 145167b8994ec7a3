// Issue 49: `petstore staging reset|seed`, black-box over the command on real databases: they
// work on a database a staging process made, and refuse in one line, exit 1, changing nothing,
// under PETSTORE_ENV=production, on a database production made, and on one made before the
// record existed. In-process (helpers/in-process.ts) but for the one case where the process
// itself matters: off a terminal, reset without --yes asks nothing. The store's side, on every
// engine, is in the store contract (test/store/contract.ts).
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { after, before, describe, test } from 'node:test'
import { runMain } from './helpers/in-process.ts'
import { sqliteLedger } from './helpers/ledger.ts'
import { logLines } from './helpers/logs.ts'
import { createTestDatabase, onDatabase, postgresSkipReason } from './helpers/postgres.ts'
import { runCli, startService } from './helpers/process.ts'
import { tempDir } from './helpers/server.ts'

/** The pets in the file, in id order: [id, name]. */
function petsIn(path: string): [number, string][] {
  const db = new DatabaseSync(path, { readOnly: true })
  try {
    return db
      .prepare('SELECT id, name FROM pets ORDER BY id')
      .all()
      .map((row) => [Number(row.id), String(row.name)])
  } finally {
    db.close()
  }
}

function onFile(path: string, sql: string): void {
  const db = new DatabaseSync(path)
  try {
    db.exec(sql)
  } finally {
    db.close()
  }
}

/** A refusal: exit 1, one line on stderr matching `pattern`, nothing on stdout. */
function assertRefused(
  result: { code: number | null; stdout: string; stderr: string },
  pattern: RegExp,
) {
  assert.equal(result.code, 1, result.stderr)
  assert.equal(result.stdout, '')
  const lines = result.stderr.split('\n')
  assert.deepEqual(lines.length, 2, result.stderr)
  assert.equal(lines[1], '')
  assert.match(lines[0] ?? '', pattern)
}

const postgresSkip = await postgresSkipReason()

describe('petstore staging (issue 49)', () => {
  let dir: Awaited<ReturnType<typeof tempDir>>
  let databases = 0

  before(async () => {
    dir = await tempDir()
  })
  after(() => dir.remove())

  /** A new SQLite file, and the environment of a command on it as `env`. */
  function database(env: 'staging' | 'production') {
    const path = join(dir.path, `db-${++databases}.db`)
    return { path, env: { DATABASE_URL: `sqlite:${path}`, PETSTORE_ENV: env, LOG_LEVEL: 'warn' } }
  }

  test('on a database staging made: seed --pets, seed --from, then reset --yes; keys stay, ids start at 1 again', async () => {
    const { path, env } = database('staging')
    const seeded = await runMain(['staging', 'seed', '--pets', '6'], env)
    assert.equal(seeded.code, 0, seeded.stderr)
    assert.equal(seeded.stdout, 'Created 6 pets, ids 1–6.\n')
    assert.deepEqual(
      petsIn(path).map(([, name]) => name),
      [1, 2, 3, 4, 5, 6].map((i) => `Pet ${i}`),
    )

    const file = join(dir.path, 'pets.json')
    await writeFile(
      file,
      JSON.stringify([
        { name: 'Rex', categoryId: 1, status: 'available' },
        { name: 'Whiskers', categoryId: 2 },
      ]),
    )
    const added = await runMain(['staging', 'seed', '--from', file], env)
    assert.equal(added.code, 0, added.stderr)
    assert.equal(added.stdout, 'Created 2 pets, ids 7–8.\n', 'after the pets there')
    assert.deepEqual(petsIn(path).slice(-2), [
      [7, 'Rex'],
      [8, 'Whiskers'],
    ])

    const key = await runMain(['keys', 'create', '--name', 'kept'], env)
    assert.equal(key.code, 0, key.stderr)
    // A create's Idempotency-Key record, as the service stores it (D14).
    onFile(
      path,
      `INSERT INTO idempotency_keys (api_key_id, key, fingerprint, status, body, location, created_at)
        VALUES ('key_x', 'k1', 'f', 201, '{}', '/v1/pets/8', ${Date.now()})`,
    )
    const reset = await runMain(['staging', 'reset', '--yes'], env)
    assert.equal(reset.code, 0, reset.stderr)
    assert.equal(
      reset.stdout,
      "Deleted 8 pets and 1 Idempotency-Key record; API keys kept. The next pet's id is 1.\n",
    )
    assert.deepEqual(petsIn(path), [])
    const keys = await runMain(['keys', 'list', '--json'], env)
    assert.deepEqual(
      (JSON.parse(keys.stdout) as { name: string; state: string }[]).map((k) => [k.name, k.state]),
      [['kept', 'active']],
    )
    const again = await runMain(['staging', 'seed', '--pets', '1'], env)
    assert.equal(again.stdout, 'Created 1 pet, id 1.\n')
  })

  test('PETSTORE_ENV=production: reset and seed refuse in one line, changing nothing', async () => {
    const { path, env } = database('staging')
    assert.equal((await runMain(['staging', 'seed', '--pets', '3'], env)).code, 0)
    const production = { ...env, PETSTORE_ENV: 'production' }
    assertRefused(
      await runMain(['staging', 'reset', '--yes'], production),
      /^petstore: staging reset is for staging only: PETSTORE_ENV is production; nothing was changed$/,
    )
    assertRefused(
      await runMain(['staging', 'seed', '--pets', '2'], production),
      /^petstore: staging seed is for staging only: PETSTORE_ENV is production/,
    )
    assert.equal(petsIn(path).length, 3)
  })

  test('a database production made: refused with PETSTORE_ENV=staging too, changing nothing', async () => {
    const { path, env } = database('production')
    assert.equal((await runMain(['migrate'], env)).code, 0)
    onFile(path, "INSERT INTO pets (name, category_id) VALUES ('production pet', 1)")
    const staging = { ...env, PETSTORE_ENV: 'staging' }
    for (const args of [
      ['staging', 'reset', '--yes'],
      ['staging', 'seed', '--pets', '2'],
    ]) {
      assertRefused(
        await runMain(args, staging),
        new RegExp(
          `^petstore: staging ${args[1]} refused: the database was made by a production instance \\(recorded at its first migration\\), and staging commands change only a database made by staging; nothing was changed$`,
        ),
      )
    }
    assert.deepEqual(petsIn(path), [[1, 'production pet']])
  })

  test('a database made before the record: its environment unknown, refused, not even migrated', async () => {
    const { path, env } = database('staging')
    assert.equal((await runMain(['staging', 'seed', '--pets', '2'], env)).code, 0)
    // As the release before migration 5 left it.
    onFile(path, 'DROP TABLE database_environment')
    await sqliteLedger(path).remove(5)
    for (const args of [
      ['staging', 'reset', '--yes'],
      ['staging', 'seed', '--pets', '2'],
    ]) {
      assertRefused(
        await runMain(args, env),
        /^petstore: staging \w+ refused: the database's environment is unknown: .*migration 5.*; nothing was changed\. Make a new database for staging, or, where this one is staging's, record it so with "petstore environment record staging --yes"$/,
      )
    }
    assert.equal(petsIn(path).length, 2)
    const status = await runMain(['migrate', '--status'], env)
    assert.match(status.stdout, /^5 +database environment +pending$/m, 'not migrated')
  })

  test('reset without --yes: off a terminal it asks nothing and refuses; at one only "reset" goes on', async () => {
    const { path, env } = database('staging')
    assert.equal((await runMain(['staging', 'seed', '--pets', '2'], env)).code, 0)
    const refusal =
      /^petstore: staging reset deletes every pet and asks first only on a terminal: give --yes to delete without asking; nothing was deleted$/
    // The real command, whose standard input is no terminal.
    assertRefused(await runCli(['staging', 'reset'], env), refusal)
    assertRefused(await runMain(['staging', 'reset'], env, 'reset\n'), refusal)

    const declined = await runMain(['staging', 'reset'], env, 'yes\n', { interactive: true })
    assert.equal(declined.code, 1)
    assert.match(
      declined.stderr,
      /^This deletes every pet and every Idempotency-Key record in the SQLite database .*; API keys stay\.\nType "reset" to go on: petstore: staging reset was not confirmed \(it takes the word "reset"\); nothing was deleted\n$/,
    )
    assert.equal(petsIn(path).length, 2)

    const confirmed = await runMain(['staging', 'reset'], env, 'reset\n', { interactive: true })
    assert.equal(confirmed.code, 0, confirmed.stderr)
    assert.match(confirmed.stdout, /^Deleted 2 pets and 0 Idempotency-Key records/)
    assert.deepEqual(petsIn(path), [])
  })

  test('seed --from: every invalid pet named by its index and rule, nothing created; a file that is no array refused', async () => {
    const { path, env } = database('staging')
    const file = join(dir.path, 'bad.json')
    await writeFile(
      file,
      JSON.stringify([
        { name: 'fine', categoryId: 1 },
        { name: 'Rex', categoryId: 0 },
        { name: 'Rex', categoryId: 1, id: 4 },
        'Rex',
        { name: 'Rex', categoryId: 1, status: 'lost' },
      ]),
    )
    assertRefused(
      await runMain(['staging', 'seed', '--from', file], env),
      new RegExp(
        `^petstore: ${file} has 4 invalid pets, so nothing was created: ` +
          'index 1: categoryId must be an integer from 1 to 9007199254740991; ' +
          'index 2: pet has an unknown field "id"; a NewPet has only name, categoryId and status; ' +
          'index 3: pet must be a JSON object; ' +
          'index 4: status must be one of available, pending, sold$',
      ),
    )
    for (const [content, kind] of [
      ['{"name": "Rex", "categoryId": 1}', /holds an object, not an array/],
      ['[{"name": "Rex",', /is not JSON \(/],
    ] as const) {
      await writeFile(file, content)
      assertRefused(await runMain(['staging', 'seed', '--from', file], env), kind)
    }
    assert.equal(existsSync(path), false, 'the file is checked before the database is opened')
  })

  test('wrong usage is exit 2; --help has its own text, and the overview names staging', async () => {
    const { env } = database('staging')
    for (const args of [
      ['staging'],
      ['staging', 'seed'],
      ['staging', 'seed', '--pets', '0'],
      ['staging', 'seed', '--pets', '1000001'],
      ['staging', 'seed', '--pets', '2', '--from', 'pets.json'],
      ['staging', 'reset', 'now'],
    ]) {
      const result = await runMain(args, env)
      assert.equal(result.code, 2, args.join(' '))
      assert.match(result.stderr, /\nRun "petstore staging --help" for usage\.\n$/)
    }
    const help = await runMain(['staging', 'seed', '--help'], env)
    assert.equal(help.code, 0)
    assert.match(help.stdout, /^Usage: petstore staging reset \[--yes\]\n/)
    assert.match((await runMain(['--help'], env)).stdout, /^ {2}staging reset\|seed /m)
  })

  /**
   * Issue 53's review, on any engine: a database made by a staging migrate, then production's
   * commands on it. Each refuses in one line, exit 1, naming both ways out, changing nothing;
   * `environment record production --yes` is the deliberate one, after which production's
   * keys work and staging reset refuses, so production's pets stay.
   */
  async function reviewSequence(
    env: Record<string, string>,
    pets: { add(name: string): Promise<void>; names(): Promise<string[]> },
  ) {
    const staging = { ...env, PETSTORE_ENV: 'staging' }
    const production = { ...env, PETSTORE_ENV: 'production' }
    assert.equal((await runMain(['migrate'], staging)).code, 0)

    const refusal =
      /^petstore: the database was made by a staging instance \(recorded at its first migration\), and this process is production \(PETSTORE_ENV\): .*nothing was changed\. .*"petstore environment record production --yes"/
    for (const args of [['keys', 'create', '--name', 'ci'], ['migrate'], ['keys', 'list']]) {
      assertRefused(await runMain(args, production), refusal)
    }
    // A process of its own: were the refusal to break, serve would listen, not hang this file.
    const serve = await runCli(['serve'], { ...production, PORT: '0', METRICS_PORT: 'off' })
    assert.equal(serve.code, 1, serve.stdout)
    assert.match(serve.stderr.trim(), refusal)
    assert.equal(serve.stderr.trim().split('\n').length, 1, serve.stderr)
    assert.equal(serve.stdout.includes('Server listening'), false)
    const off = await runMain(['keys', 'create', '--name', 'ci'], {
      ...production,
      PETSTORE_MIGRATE: 'off',
    })
    assertRefused(off, refusal)

    const status = await runMain(['migrate', '--status'], production)
    assert.equal(status.code, 1)
    assert.match(status.stdout, /^Environment: staging \(recorded for the database\)\.$/m)
    assert.match(status.stderr, refusal)
    assert.equal((await runMain(['keys', 'list', '--json'], staging)).stdout, '[]\n', 'no key made')

    // The deliberate way out: only by a production process, only with --yes.
    assertRefused(
      await runMain(['environment', 'record', 'production', '--yes'], staging),
      /^petstore: environment record production is run by a production process, and PETSTORE_ENV is staging: .*nothing was changed$/,
    )
    assertRefused(
      await runMain(['environment', 'record', 'production'], production),
      /^petstore: environment record production records the database as production's: .*Give --yes to record it; nothing was changed$/,
    )
    const recorded = await runMain(['environment', 'record', 'production', '--yes'], production)
    assert.equal(recorded.code, 0, recorded.stderr)
    assert.match(
      recorded.stdout,
      /^Recorded the database as production's \(it said staging\): production serves it, .*"staging reset" and "staging seed" refuse it\.\n$/,
    )
    assert.equal(
      (await runMain(['environment', 'show'], production)).stdout,
      'Environment: production (recorded for the database).\n',
    )
    const key = await runMain(['keys', 'create', '--name', 'ci'], production)
    assert.equal(key.code, 0, key.stderr)
    for (const name of ['Rex', 'Tom', 'Kit']) await pets.add(name)
    assertRefused(
      await runMain(['staging', 'reset', '--yes'], staging),
      /^petstore: staging reset refused: the database was made by a production instance/,
    )
    assert.deepEqual(await pets.names(), ['Rex', 'Tom', 'Kit'], 'no pet lost')
  }

  test("issue 53: production refuses a database staging made (serve, migrate, keys), until it is recorded as production's; no pet lost", async () => {
    const { path, env } = database('staging')
    await reviewSequence(env, {
      add: async (name) =>
        onFile(path, `INSERT INTO pets (name, category_id) VALUES ('${name}', 1)`),
      names: async () => petsIn(path).map(([, name]) => name),
    })
  })

  test('issue 53: a database made before the record is served by production, said once in the log; --status and show say unknown', async () => {
    const { path, env } = database('production')
    assert.equal((await runMain(['migrate'], env)).code, 0)
    onFile(path, 'DROP TABLE database_environment')
    await sqliteLedger(path).remove(5)
    const service = await startService({ ...env, LOG_LEVEL: 'info' })
    try {
      const said = logLines(service.stdout()).filter((line) =>
        String(line.msg).startsWith('the database has no record of the environment'),
      )
      assert.equal(said.length, 1, service.stdout())
      assert.equal(said[0]?.level, 40, 'a warning')
      assert.match(String(said[0]?.msg), /"petstore environment record production --yes"/)
      assert.equal((await fetch(`${service.url}/readyz`)).status, 200)
    } finally {
      assert.equal(await service.stop(), 0)
    }
    const status = await runMain(['migrate', '--status'], env)
    assert.equal(status.code, 0, status.stderr)
    assert.match(
      status.stdout,
      /^Environment: unknown \(the database was made before migration 5 recorded it\); "petstore environment record production\|staging --yes" records it\.$/m,
    )
    assert.equal(
      (await runMain(['environment', 'show'], env)).stdout,
      'Environment: unknown (the database was made before migration 5 recorded it); "petstore environment record production|staging --yes" records it.\n',
    )
    const recorded = await runMain(['environment', 'record', 'production', '--yes'], env)
    assert.match(recorded.stdout, /^Recorded the database as production's \(it said nothing\)/)
  })

  describe('on PostgreSQL', { skip: postgresSkip }, () => {
    test('a new database made by staging is seeded and reset; one made by production refused', async () => {
      const [staging, production] = await Promise.all([createTestDatabase(), createTestDatabase()])
      try {
        const env = (url: string, pooler: string) => ({
          DATABASE_URL: url,
          DATABASE_POOLER: pooler,
          PETSTORE_ENV: 'staging',
          LOG_LEVEL: 'warn',
        })
        const onStaging = env(staging.url, staging.pooler)
        const seeded = await runMain(['staging', 'seed', '--pets', '3'], onStaging)
        assert.equal(seeded.stdout, 'Created 3 pets, ids 1–3.\n', seeded.stderr)
        const reset = await runMain(['staging', 'reset', '--yes'], onStaging)
        assert.match(reset.stdout, /^Deleted 3 pets and 0 Idempotency-Key records;/, reset.stderr)

        const onProduction = env(production.url, production.pooler)
        const made = await runMain(['migrate'], { ...onProduction, PETSTORE_ENV: 'production' })
        assert.equal(made.code, 0, made.stderr)
        await onDatabase(production.url, (client) =>
          client.query("INSERT INTO pets (name, category_id) VALUES ('production pet', 1)"),
        )
        assertRefused(
          await runMain(['staging', 'reset', '--yes'], onProduction),
          /refused: the database was made by a production instance/,
        )
        const { rows } = await onDatabase(production.url, (client) =>
          client.query('SELECT count(*)::int AS n FROM pets'),
        )
        assert.deepEqual(rows, [{ n: 1 }])
      } finally {
        await Promise.all([staging.drop(), production.drop()])
      }
    })

    test("issue 53: production refuses a database staging made, until it is recorded as production's; no pet lost", async () => {
      const database = await createTestDatabase()
      try {
        const env = {
          DATABASE_URL: database.url,
          DATABASE_POOLER: database.pooler,
          LOG_LEVEL: 'warn',
        }
        await reviewSequence(env, {
          add: async (name) => {
            await onDatabase(database.url, (client) =>
              client.query('INSERT INTO pets (name, category_id) VALUES ($1, 1)', [name]),
            )
          },
          names: async () => {
            const { rows } = await onDatabase(database.url, (client) =>
              client.query<{ name: string }>('SELECT name FROM pets ORDER BY id'),
            )
            return rows.map((row) => row.name)
          },
        })
      } finally {
        await database.drop()
      }
    })
  })
})
