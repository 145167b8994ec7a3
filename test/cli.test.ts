// The `petstore` command, on a real SQLite file. Its arguments, messages and exit codes are
// checked in-process (main with captured output: helpers/in-process.ts), which saves a Node.js
// start per case; the command as an operator runs it, a real process (helpers/process.ts), where
// the process matters: the binary's streams and exit codes, a key used by a running service, a
// backup beside a live one, and serve, whose failures end the process.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { chmod, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises'
import { type AddressInfo, createServer } from 'node:net'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { parseApiKey } from '../src/contract/api-key.ts'
import { createKeyVerifier, verifyKey } from '../src/keys/verifier.ts'
import { openStore } from '../src/store/open.ts'
import { runMain } from './helpers/in-process.ts'
import { type LogLine, logLines } from './helpers/logs.ts'
import { ADMIN_URL, createTestDatabase, postgresSkipReason } from './helpers/postgres.ts'
import { BIN, runCli, startService } from './helpers/process.ts'
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
    const first = await runMain(['migrate'], env)
    assert.equal(first.code, 0, first.stderr)
    assert.match(
      first.stdout,
      /^Applied migration 1 \(pets and api keys\) in \d+ ms\.\n.*\nApplied migration 4 \(.*\) in \d+ ms\.\n$/s,
    )
    const second = await runMain(['migrate'], env)
    assert.equal(second.code, 0)
    assert.match(second.stdout, /up to date/)
  })

  test('keys create prints the key once; it works on all three operations; revoke stops it within the bound', async () => {
    // The commands in-process (the real binary's streams are the test below); the service that
    // uses the key is a real process, with a store of its own beside theirs.
    const created = await runMain(['keys', 'create', '--name', 'ops team'], env)
    assert.equal(created.code, 0, created.stderr)
    const key = created.stdout.trim()
    assert.match(key, /^petstore_live_[0-9A-Za-z]{38}$/)
    const id = /Created (key_[0-9A-Za-z]+)/.exec(created.stderr)?.[1]
    assert.ok(id, created.stderr)

    const listed = await runMain(['keys', 'list'], env)
    assert.equal(listed.code, 0)
    assert.match(listed.stdout, new RegExp(`${id}\\s+ops team\\s+petstore_live_…${key.slice(-4)}`))
    assert.ok(!listed.stdout.includes(key), 'keys list never shows a key')

    const keyCacheMs = 300
    const service = await startService({ ...env, PETSTORE_KEY_CACHE_MS: String(keyCacheMs) })
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

      const revoked = await runMain(['keys', 'revoke', id], env)
      assert.equal(revoked.code, 0, revoked.stderr)
      // D3: every answer the service believes was asked of the store before the revocation
      // committed, so once PETSTORE_KEY_CACHE_MS has passed since then, the key is refused.
      await delay(keyCacheMs)
      assert.equal((await fetch(`${service.url}/v1/pets`, { headers: auth })).status, 401)
    } finally {
      assert.equal(await service.stop(), 0)
    }
    const again = await runMain(['keys', 'revoke', id], env)
    assert.equal(again.code, 1, 'a revoked key: the command failed, it was not called wrongly')
    assert.equal(again.stderr, `petstore: no active key with ID ${id} (see "petstore keys list")\n`)
    const unknown = await runMain(['keys', 'revoke', 'key_000000000000'], env)
    assert.equal(unknown.code, 1)
    assert.equal(unknown.stderr.trim().split('\n').length, 1, unknown.stderr)
    const keys = JSON.parse((await runMain(['keys', 'list', '--json'], env)).stdout) as {
      id: string
      state: string
      revokedAt?: string
    }[]
    const states = new Map(keys.map((k) => [k.id, k]))
    assert.equal(states.get(id)?.state, 'revoked')
    assert.match(states.get(id)?.revokedAt ?? '', /^\d{4}-\d\d-\d\dT/)
    const others = keys.filter((k) => k.id !== id)
    assert.ok(others.every((k) => k.state === 'active' && !('revokedAt' in k)))
  })

  test('keys revoke given the key itself, not its id, repeats no secret and revokes nothing', async () => {
    const created = await runMain(['keys', 'create', '--name', 'pasted'], env)
    const key = created.stdout.trim()
    for (const given of [key, key.slice(0, -1), 'some-opaque-operator-secret-0123456789']) {
      const result = await runMain(['keys', 'revoke', given], env)
      assert.equal(result.code, 2)
      assert.ok(!result.stderr.includes(given), `the argument is not repeated: ${result.stderr}`)
      assert.match(
        result.stderr,
        given.startsWith('petstore_')
          ? /^petstore: keys revoke was given an API key where its ID is expected; nothing was revoked/
          : /^petstore: keys revoke needs a key ID \(key_ and 12 letters or digits/,
      )
    }
    const keys = JSON.parse((await runMain(['keys', 'list', '--json'], env)).stdout) as {
      name: string
      state: string
    }[]
    assert.equal(keys.find((k) => k.name === 'pasted')?.state, 'active')
  })

  test('a key pasted where another argument belongs is never repeated in the error', async () => {
    const key = (await runMain(['keys', 'create', '--name', 'p2'], env)).stdout.trim()
    const opaque = 'operator-secret-in-the-environment-0123456789'
    // A key of PETSTORE_API_KEYS_FILE (a mounted Secret), on the file's second line.
    const inFile = 'operator-secret-in-a-mounted-file-0123456789'
    const file = join(dir.path, 'api-keys')
    await writeFile(file, `another-operator-secret-0123456789abcdef\n${inFile}\n`)
    const withKeys = { ...env, PETSTORE_API_KEY: opaque, PETSTORE_API_KEYS_FILE: file }
    for (const args of [
      [key],
      ['keys', key],
      ['pets', 'list', key],
      ['pets', 'get', key],
      ['pets', 'list', '--status', key],
      ['pets', 'list', opaque],
      ['pets', 'list', inFile],
    ]) {
      const result = await runMain(args, withKeys)
      assert.equal(result.code, 2, args.join(' '))
      for (const secret of [key, opaque, inFile]) {
        assert.ok(!result.stderr.includes(secret), result.stderr)
      }
    }
  })

  test('backup copies the live database; a service on the copy has every pet and key', async () => {
    const created = await runMain(['keys', 'create', '--name', 'backup check'], env)
    const key = created.stdout.trim()
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
    const service = await startService(env)
    const copy = join(dir.path, 'copy.db')
    let made: { id: number; name: string }[]
    /** The pets the backup's line counted in the copy. */
    let pets = 0
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
      // Size and contents, counted in the copy: the 50 creates answered before it began, and
      // any of the 50 under way that had committed.
      const summary =
        /^Backed up .* to .*copy\.db: \d+\.\d (KiB|MiB) \((\d+) bytes\), (\d+) pets, (\d+) API keys \((\d+) active\)\.$/m.exec(
          result.stdout,
        )
      assert.ok(summary, result.stdout)
      const [, , bytes, counted, keys, active] = summary.map(Number)
      pets = counted ?? 0
      assert.equal(bytes, (await stat(copy)).size)
      const listed = JSON.parse((await runMain(['keys', 'list', '--json'], env)).stdout) as {
        state: string
      }[]
      assert.equal(keys, listed.length)
      assert.equal(active, listed.filter((k) => k.state === 'active').length)
    } finally {
      assert.equal(await service.stop(), 0)
    }

    // The copy read as a service on it would read it, without starting one (a Node.js start and
    // 150 requests of CPU): its store, opened as serve opens it, and the key verifier that the
    // service's authentication asks for every request (process/compose.ts), on that store. A key
    // this verifier accepts on the copy is a key a service on the copy accepts: the HTTP layer
    // around the verifier is the same for every database (test/http/auth.test.ts covers it).
    const restored = await openStore({ engine: 'sqlite', path: copy })
    try {
      assert.deepEqual((await restored.schema()).pending, [], 'the copy needs no migration')
      const verifier = createKeyVerifier({
        env: 'production',
        apiKeys: restored.apiKeys,
        bootstrapKeys: [],
      })
      assert.equal((await verifyKey(verifier, key)).valid, true, 'the key works on the copy')
      // The pets the line counted are the pets the copy holds, read page by page as GET /v1/pets.
      let served = 0
      for (let afterId = 0, more = true; more; ) {
        const page = await restored.pets.list({ limit: 100, afterId })
        served += page.pets.length
        afterId = page.pets.at(-1)?.id ?? afterId
        more = page.hasMore
      }
      assert.equal(served, pets)
      for (const pet of made) {
        const found = await restored.pets.get(pet.id)
        assert.ok(found, `pet ${pet.id}, acknowledged before the backup, is in the copy`)
        assert.equal(found.name, pet.name)
      }
    } finally {
      await restored.close()
    }

    const again = await runMain(['backup', copy], env)
    assert.equal(again.code, 1)
    assert.match(again.stderr, /^petstore: backup failed: .*copy\.db exists already/)
    const onPostgres = await runMain(['backup', join(dir.path, 'pg.db')], {
      ...env,
      DATABASE_URL: 'postgres://petstore@127.0.0.1:5432/petstore',
    })
    assert.equal(onPostgres.code, 1)
    assert.match(onPostgres.stderr, /pg_dump/)
    const noTarget = await runMain(['backup'], env)
    assert.equal(noTarget.code, 2)
    assert.match(noTarget.stderr, /^petstore: backup needs one argument/)
  })

  test('a staging service issues staging keys', async () => {
    const created = await runMain(['keys', 'create', '--name', 'stage'], {
      ...env,
      PETSTORE_ENV: 'staging',
    })
    assert.match(created.stdout.trim(), /^petstore_staging_/)
  })

  test("--help: the overview, or the command's own text; exit 0 on stdout", async () => {
    const help = async (args: string[]) => {
      const result = await runMain(args, env)
      assert.equal(result.code, 0, args.join(' '))
      assert.equal(result.stderr, '', args.join(' '))
      return result.stdout
    }
    const [overview, ...others] = await Promise.all(
      [['--help'], ['-h'], ['help']].map((args) => help(args)),
    )
    assert.match(overview ?? '', /^Usage: petstore <command>/)
    for (const other of others) assert.equal(other, overview)

    // Each command's own text, asked for in each of the three ways (the way does not depend on
    // the command, so one way each, and all three for keys).
    const asked: [string, string[]][] = [
      ['serve', ['serve', '--help']],
      ['migrate', ['migrate', '-h']],
      ['backup', ['help', 'backup']],
      ['keys', ['keys', '--help']],
    ]
    const texts = new Map<string, string>()
    await Promise.all(
      asked.map(async ([command, args]) => {
        const own = await help(args)
        assert.match(own, new RegExp(`^Usage: petstore ${command}\\b`), command)
        texts.set(command, own)
      }),
    )
    assert.equal(new Set(texts.values()).size, 4, 'each command has its own text')
    assert.match(texts.get('serve') ?? '', /--workers N\|auto/)
    // The keys subcommands share the keys text, wherever --help stands.
    const keysTexts = await Promise.all(
      [
        ['keys', '-h'],
        ['help', 'keys'],
        ['keys', 'create', '--name', 'x', '--help'],
        ['keys', 'revoke', 'key_x', '--help'],
      ].map((args) => help(args)),
    )
    for (const text of keysTexts) assert.equal(text, texts.get('keys'))

    const bare = await runMain([], env)
    assert.equal(bare.code, 2, 'no command at all is a usage error, with the overview')
    assert.equal(bare.stderr, overview)
  })

  test('--version and -v print the version in package.json', async () => {
    const { version } = JSON.parse(
      await readFile(new URL('../package.json', import.meta.url), 'utf8'),
    ) as { version: string }
    for (const flag of ['--version', '-v']) {
      const result = await runMain([flag], env)
      assert.equal(result.code, 0, flag)
      assert.equal(result.stdout, `petstore ${version}\n`)
      assert.equal(result.stderr, '')
    }
  })

  test('the real binary: --help on stdout, exit 0; a usage error in two lines on stderr, exit 2; --version', async () => {
    const help = await runCli(['--help'], env)
    assert.equal(help.code, 0)
    assert.equal(help.stdout, (await runMain(['--help'], env)).stdout)
    assert.match(help.stdout, /^Usage: petstore <command>/)
    assert.equal(help.stderr, '')

    const wrong = await runCli(['keys', 'list', '--name', 'x'], { ...env, PORT: 'not a port' })
    assert.equal(wrong.code, 2)
    assert.equal(wrong.stdout, '')
    assert.equal(
      wrong.stderr,
      'petstore: unknown option "--name"\nRun "petstore keys --help" for usage.\n',
    )

    const version = await runCli(['--version'], env)
    assert.equal(version.code, 0)
    assert.equal(version.stdout, (await runMain(['--version'], env)).stdout)
    assert.match(version.stdout, /^petstore \d+\.\d+\.\d+\n$/)
    assert.equal(version.stderr, '')
    // The OpenAPI document's info.version is the same number: the release (docs/api.md, Versions).
    const document = JSON.parse(
      await readFile(new URL('../docs/openapi.json', import.meta.url), 'utf8'),
    )
    assert.equal(version.stdout, `petstore ${document.info.version}\n`)
  })

  test('a usage error is one line and a pointer to the help, exit 2, whatever the environment', async () => {
    // A bad PORT too: the command line is checked first, and said to be what is wrong.
    const badEnv = { ...env, PORT: 'not a port' }
    const cases: [string[], RegExp, string][] = [
      [['frobnicate'], /^unknown command "frobnicate"$/, 'petstore --help'],
      [['--frobnicate'], /^unknown option "--frobnicate"$/, 'petstore --help'],
      [['help', 'frobnicate'], /no such command/, 'petstore --help'],
      [['serve', '--wrokers', '2'], /^unknown option "--wrokers"$/, 'petstore serve --help'],
      [['serve', '--workers', '0'], /^--workers must be a whole number/, 'petstore serve --help'],
      [['serve', 'now'], /^unexpected argument "now"/, 'petstore serve --help'],
      [['migrate', '--force'], /^unknown option "--force"$/, 'petstore migrate --help'],
      [['backup'], /^backup needs one argument/, 'petstore backup --help'],
      [['backup', 'a.db', 'b.db'], /^backup needs one argument/, 'petstore backup --help'],
      [['keys'], /^keys needs a subcommand: create, list or revoke$/, 'petstore keys --help'],
      [['keys', 'delete', 'key_x'], /^unknown keys subcommand "delete"/, 'petstore keys --help'],
      [['keys', 'create'], /^keys create needs --name NAME/, 'petstore keys --help'],
      [['keys', 'list', '--name', 'x'], /^unknown option "--name"$/, 'petstore keys --help'],
      [['keys', 'list', '--json=yes'], /^option "--json" does not take/, 'petstore keys --help'],
      [['keys', 'revoke'], /^keys revoke needs one argument/, 'petstore keys --help'],
    ]
    await Promise.all(
      cases.map(async ([args, message, help]) => {
        const result = await runMain(args, badEnv)
        assert.equal(result.code, 2, args.join(' '))
        assert.equal(result.stdout, '')
        const [first = '', second, ...more] = result.stderr.split('\n')
        assert.match(first.replace(/^petstore: /, ''), message, args.join(' '))
        assert.ok(first.startsWith('petstore: '), first)
        assert.equal(second, `Run "${help}" for usage.`, args.join(' '))
        assert.deepEqual(more, [''], `two lines, no usage text: ${result.stderr}`)
      }),
    )
  })

  test('serve --port and other options named as a setting: one line naming the variable, exit 2', async () => {
    const cases: [string[], string][] = [
      [
        ['--port', '9000'],
        'serve takes no --port option; set the PORT environment variable: "PORT=9000 petstore serve"',
      ],
      [
        ['--port=9000'],
        'serve takes no --port option; set the PORT environment variable: "PORT=9000 petstore serve"',
      ],
      [
        ['--host', '0.0.0.0'],
        'serve takes no --host option; set the HOST environment variable: "HOST=0.0.0.0 petstore serve"',
      ],
      [
        ['--log-level', 'debug'],
        'serve takes no --log-level option; set the LOG_LEVEL environment variable: "LOG_LEVEL=debug petstore serve"',
      ],
      // After a --workers that is right; with PETSTORE_ before it; with no value.
      [
        ['--workers', '2', '--metrics-port=9465'],
        'serve takes no --metrics-port option; set the METRICS_PORT environment variable: "METRICS_PORT=9465 petstore serve"',
      ],
      [
        ['--rate-limit', '100'],
        'serve takes no --rate-limit option; set the PETSTORE_RATE_LIMIT environment variable: "PETSTORE_RATE_LIMIT=100 petstore serve"',
      ],
      [
        ['--port'],
        'serve takes no --port option; set the PORT environment variable: "PORT=… petstore serve"',
      ],
      // A value that may hold a password is not repeated.
      [
        ['--database-url', 'postgres://petstore:s3cret@db/petstore'],
        'serve takes no --database-url option; set the DATABASE_URL environment variable: "DATABASE_URL=… petstore serve"',
      ],
      // Options named as no setting: the usual message.
      [['--frobnicate'], 'unknown option "--frobnicate"'],
      [['-p', '9000'], 'unknown option "-p"'],
    ]
    await Promise.all(
      cases.map(async ([args, message]) => {
        const result = await runMain(['serve', ...args], env)
        assert.equal(result.code, 2, args.join(' '))
        assert.equal(result.stdout, '')
        assert.equal(
          result.stderr,
          `petstore: ${message}\nRun "petstore serve --help" for usage.\n`,
          args.join(' '),
        )
      }),
    )
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
        /^petstore: cannot connect to PostgreSQL at 127\.0\.0\.1:1 as "petstore" \(DATABASE_URL\): nothing accepts connections there; .+\?$/,
      ],
    ] as const) {
      // serve, alone and as a cluster's primary, as processes: a failed start ends the process
      // (bin/petstore.js), with started parts that could keep it alive. migrate in-process.
      for (const args of [['serve'], ['migrate'], ['serve', '--workers', '2']]) {
        const run = args[0] === 'serve' ? runCli : runMain
        const result = await run(args, { ...env, DATABASE_URL: url })
        assert.equal(result.code, 1, `${args.join(' ')} on ${url}`)
        const lines = result.stderr.trim().split('\n')
        assert.equal(lines.length, 1, result.stderr)
        assert.match(lines[0] ?? '', expected)
      }
    }
  })

  test('a PostgreSQL that refuses the database or the role: one line saying what to do, exit 1, for every command', async (t) => {
    const skip = await postgresSkipReason()
    if (skip !== undefined) return t.skip(skip)
    const admin = new URL(ADMIN_URL)
    const at = `${admin.hostname}:${admin.port || '5432'}`
    const url = (user: string, database: string) => {
      const made = new URL(ADMIN_URL)
      made.username = user
      // The server trusts this machine and ignores it; the line must never show it.
      made.password = 'not-to-be-shown'
      made.pathname = `/${database}`
      return made.toString()
    }
    const adminUser = admin.username || 'postgres'
    const cases = [
      {
        url: url(adminUser, 'petstore_no_such_database'),
        line: `petstore: cannot connect to PostgreSQL at ${at} as "${adminUser}" (DATABASE_URL): there is no database "petstore_no_such_database"; create it (createdb -h ${admin.hostname} -p ${admin.port || '5432'} petstore_no_such_database) or name another in DATABASE_URL`,
      },
      {
        url: url('petstore_no_such_role', 'postgres'),
        line: `petstore: cannot connect to PostgreSQL at ${at} as "petstore_no_such_role" (DATABASE_URL): there is no role "petstore_no_such_role"; create it (createuser -h ${admin.hostname} -p ${admin.port || '5432'} petstore_no_such_role) or name another user in DATABASE_URL`,
      },
    ]
    const commands = [['serve'], ['serve', '--workers', '2'], ['migrate'], ['keys', 'list']]
    await Promise.all(
      cases.flatMap(({ url, line }) =>
        commands.map(async (args) => {
          // serve as a process, alone and as a cluster's primary: what an operator sees.
          const run = args[0] === 'serve' ? runCli : runMain
          const result = await run(args, { ...env, DATABASE_URL: url, PORT: '0' })
          assert.equal(result.code, 1, `${args.join(' ')}: ${result.stderr}`)
          assert.equal(result.stderr, `${line}\n`, args.join(' '))
          assert.doesNotMatch(result.stdout, /\bat .+:\d+:\d+\)?$/m, 'no stack frame')
          assert.ok(!`${result.stdout}${result.stderr}`.includes('not-to-be-shown'))
        }),
      ),
    )
  })

  test('serve says once, before it listens, which store it uses, how many processes and the environment', async (t) => {
    const lineOf = (stdout: string) => {
      const lines = logLines(stdout).filter((l) => /^starting: /.test(l.msg ?? ''))
      assert.equal(lines.length, 1, stdout)
      const listening = logLines(stdout).findIndex((l) => /listening at/.test(l.msg ?? ''))
      assert.ok(logLines(stdout).indexOf(lines[0] as LogLine) < listening, 'before listening')
      return lines[0] as LogLine
    }
    const file = join(dir.path, 'cli.db')
    for (const args of [[], ['--workers', '2']]) {
      const service = await startService({ ...env, PETSTORE_ENV: 'production' }, args)
      const workers = args.length === 0 ? 1 : 2
      await service.stop()
      const line = lineOf(service.stdout())
      assert.equal(
        line.msg,
        `starting: SQLite database ${file}; ${workers === 1 ? '1 process' : '2 worker processes'}; production`,
      )
      assert.equal(line.engine, 'sqlite')
      assert.equal(line.database, file)
      assert.equal(line.workers, workers)
      assert.equal(line.environment, 'production')
    }
    const skip = await postgresSkipReason()
    if (skip !== undefined) return t.skip(skip)
    const database = await createTestDatabase()
    try {
      const url = new URL(database.url)
      // The server trusts this machine and ignores it; the line must never show it.
      url.password = 'not-to-be-shown'
      const service = await startService({
        ...env,
        DATABASE_URL: url.toString(),
        DATABASE_POOLER: database.pooler,
        PETSTORE_ENV: 'staging',
      })
      await service.stop()
      const line = lineOf(service.stdout())
      const port = Number(url.port || 5432)
      assert.equal(
        line.msg,
        `starting: PostgreSQL database "${database.name}" at ${url.hostname}:${port} as "${url.username}", pooler ${database.pooler}, pool 10; 1 process; staging`,
      )
      assert.deepEqual(
        [line.engine, line.host, line.port, line.database],
        ['postgres', url.hostname, port, database.name],
      )
      assert.ok(!service.stdout().includes('not-to-be-shown'))
    } finally {
      await database.drop()
    }
  })

  test('serve names each unknown variable of its namespaces once, with the nearest known name, and says in the start line what is on', async () => {
    const service = await startService({
      ...env,
      PETSTORE_ENV: 'staging',
      DATABASE_URL: 'sqlite::memory:',
      PETSTORE_STAGING_FAULT: '503:0.5', // the singular: a slip for PETSTORE_STAGING_FAULTS
      PETSTORE_STAGING_FAULTS: '503:0.05,delay:200ms:0.1',
      DB_URL: 'sqlite:./elsewhere.db',
      PETSTORE_NOT_A_SETTING_AT_ALL: 'x',
      PROBE_PORT: '0',
      HOME_DIRECTORY: 'not ours: no line',
    })
    await service.stop()
    const lines = logLines(service.stdout())
    const unknown = lines.filter((l) => /is not a variable petstore reads/.test(l.msg ?? ''))
    assert.deepEqual(
      unknown.map((l) => l.msg),
      [
        'DB_URL is set but is not a variable petstore reads, so it changes nothing; did you mean DATABASE_URL? (every variable: docs/configuration.md)',
        'PETSTORE_NOT_A_SETTING_AT_ALL is set but is not a variable petstore reads, so it changes nothing (every variable: docs/configuration.md)',
        'PETSTORE_STAGING_FAULT is set but is not a variable petstore reads, so it changes nothing; did you mean PETSTORE_STAGING_FAULTS? (every variable: docs/configuration.md)',
      ],
    )
    assert.ok(
      unknown.every((l) => l.level === 40),
      'warnings',
    )
    assert.ok(!service.stdout().includes('elsewhere.db'), 'a value is never shown')
    const start = lines.filter((l) => /^starting: /.test(l.msg ?? ''))
    assert.equal(
      start[0]?.msg,
      'starting: SQLite in memory (lost when the process ends); 1 process; staging; staging faults 503:0.05,delay:200ms:0.1; probes on 127.0.0.1:0 (PROBE_PORT)',
    )
    assert.equal(start.length, 1)
  })

  test('--workers refuses an in-memory database, which its processes cannot share', async () => {
    // In-process: refused before the primary listens or forks (as the argument errors above).
    const result = await runMain(['serve', '--workers', '2'], {
      ...env,
      DATABASE_URL: 'sqlite::memory:',
    })
    assert.equal(result.code, 2)
    assert.match(result.stderr, /^petstore: --workers needs a database its processes share/)
    assert.equal(result.stderr.split('\n')[1], 'Run "petstore serve --help" for usage.')
  })

  test('an address serve cannot listen on is one line naming the variable, exit 1', async () => {
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
    const { port } = taken.address() as AddressInfo
    try {
      const cases: [Record<string, string>, string[], string][] = [
        [{ PORT: String(port) }, [], `127.0.0.1:${port}: the port is in use (PORT)`],
        [
          { PORT: String(port) },
          ['--workers', '2'],
          `127.0.0.1:${port}: the port is in use (PORT)`,
        ],
        // 192.0.2.0/24 is for documentation (RFC 5737): no machine of ours has it.
        [
          { HOST: '192.0.2.1', PORT: '0' },
          [],
          "192.0.2.1:0: the address is not one of this machine's (HOST)",
        ],
        [
          { HOST: '192.0.2.1', PORT: '0' },
          ['--workers', '2'],
          "192.0.2.1:0: the address is not one of this machine's (HOST)",
        ],
        // .invalid never resolves (RFC 6761); a resolver that cannot be asked says so instead.
        [{ HOST: 'petstore.invalid', PORT: '0' }, [], 'petstore.invalid:0: the host name'],
      ]
      await Promise.all(
        cases.map(async ([vars, args, expected]) => {
          const what = `serve ${args.join(' ')} with ${JSON.stringify(vars)}`
          const result = await runCli(['serve', ...args], { ...env, ...vars })
          assert.equal(result.code, 1, what)
          const lines = result.stderr.trim().split('\n')
          assert.equal(lines.length, 1, `${what}: ${result.stderr}`)
          assert.ok(lines[0]?.startsWith(`petstore: cannot listen on ${expected}`), result.stderr)
          assert.match(lines[0] ?? '', /\((HOST|PORT)\)$/)
          assert.ok(!result.stdout.includes('"stack"'), `${what}: no stack trace in the log`)
        }),
      )
    } finally {
      taken.close()
    }
  })

  for (const variable of ['METRICS_PORT', 'PROBE_PORT']) {
    test(`a ${variable} serve cannot listen on is one line naming it, exit 1`, async () => {
      const taken = createServer()
      await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
      const { port } = taken.address() as AddressInfo
      try {
        for (const args of [[], ['--workers', '2']]) {
          const result = await runCli(['serve', ...args], {
            ...env,
            PORT: '0',
            [variable]: String(port),
            LOG_LEVEL: 'info',
          })
          assert.equal(result.code, 1, args.join(' '))
          // Nothing said it listened: the API's port is bound only with the others.
          assert.doesNotMatch(result.stdout, /listening/i, args.join(' '))
          const lines = result.stderr.trim().split('\n')
          assert.equal(lines.length, 1, result.stderr)
          assert.equal(
            lines[0],
            `petstore: cannot listen on 127.0.0.1:${port}: the port is in use (${variable})`,
          )
        }
      } finally {
        taken.close()
      }
    })
  }

  test('the example keys and key IDs of the README and docs/ have the format the CLI makes', async () => {
    const pages = [
      'README.md',
      'docs/api.md',
      'docs/operations.md',
      'docs/container.md',
      'docs/fleet.md',
    ]
    const readme = (
      await Promise.all(
        pages.map((page) => readFile(new URL(`../${page}`, import.meta.url), 'utf8')),
      )
    ).join('\n')
    const keys = readme.match(/petstore_(live|staging)_[0-9A-Za-z]+/g) ?? []
    assert.ok(keys.length > 0)
    for (const key of keys) assert.equal(parseApiKey(key).kind, 'structured', key)
    const ids = readme.match(/\bkey_[0-9A-Za-z]+/g) ?? []
    assert.ok(ids.length > 0)
    for (const id of ids) assert.match(id, /^key_[0-9A-Za-z]{12}$/)
  })

  // Every bad value is tested through loadConfig (config.test.ts); this is how its one line
  // reaches the operator.
  test('a bad setting stops the start with one line naming it and exit code 1', async () => {
    // In-process: loadConfig refuses it before serve starts anything.
    const result = await runMain(['serve'], { ...env, PORT: 'abc' })
    assert.equal(result.code, 1)
    assert.equal(
      result.stderr,
      'petstore: invalid configuration: PORT must be an integer from 0 to 65535 (got "abc")\n',
    )
    assert.equal(result.stdout, '')
  })
})

describe("Node's compile cache: in a folder of this user's alone", () => {
  /** `petstore --version` with TMPDIR at `tmp` and no NODE_COMPILE_CACHE of the test run's. */
  async function versionWithTemp(tmp: string): Promise<void> {
    const child = spawn(process.execPath, [BIN, '--version'], {
      env: { PATH: process.env.PATH ?? '', TMPDIR: tmp },
      stdio: 'ignore',
    })
    const [code] = await once(child, 'exit')
    assert.equal(code, 0)
  }
  const uid = process.getuid?.() ?? 0

  test('made 0700 in the temporary folder, and filled', async (t) => {
    if (process.platform === 'win32') return t.skip('no uid on Windows')
    const dir = await tempDir()
    try {
      await versionWithTemp(dir.path)
      const folder = join(dir.path, `petstore-compile-cache-${uid}`)
      assert.equal((await stat(folder)).mode & 0o777, 0o700)
      assert.ok((await readdir(folder, { recursive: true })).length > 0, 'the cache was written')
      assert.deepEqual(await readdir(dir.path), [`petstore-compile-cache-${uid}`])
    } finally {
      await dir.remove()
    }
  })

  test('a folder of that name that others may write is not used', async (t) => {
    if (process.platform === 'win32') return t.skip('no uid on Windows')
    const dir = await tempDir()
    try {
      const folder = join(dir.path, `petstore-compile-cache-${uid}`)
      await mkdir(folder)
      await chmod(folder, 0o777)
      await versionWithTemp(dir.path)
      assert.deepEqual(await readdir(folder), [], 'nothing was read from or written to it')
    } finally {
      await dir.remove()
    }
  })
})
