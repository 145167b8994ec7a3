// `petstore pets list|add|get` (D18), against a service listening on a port: in-process (main
// with captured output, helpers/in-process.ts), which saves a Node.js start per case, and once
// as an operator runs it, the real command as a child process.
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { loggerOptions } from '../src/observability/logging.ts'
import { runMain } from './helpers/in-process.ts'
import { memoryLog } from './helpers/logs.ts'
import { runCli } from './helpers/process.ts'
import { startServer, type TestServer } from './helpers/server.ts'

const KEY_WARNING =
  'petstore: warning: --key puts the key in the process list and shell history; set PETSTORE_API_KEY instead, or give it on standard input with --key -\n'

/** A port on 127.0.0.1 that nothing listens on: one the system gave, closed again. */
async function closedPort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  server.close()
  await once(server, 'close')
  return port
}

describe('petstore pets', () => {
  let server: TestServer
  let env: Record<string, string>

  before(async () => {
    server = await startServer()
    env = { PETSTORE_URL: `${server.url}/v1`, PETSTORE_API_KEY: server.key }
  })
  after(() => server.close())

  async function ok(args: string[], extra: Record<string, string> = {}) {
    const result = await runMain(['pets', ...args], { ...env, ...extra })
    assert.equal(result.code, 0, `${args.join(' ')}: ${result.stderr}`)
    return result
  }

  function jsonLines(stdout: string): Record<string, unknown>[] {
    return stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line))
  }

  test('add, list and get: a table for people, JSON lines with --json', async () => {
    const added = await ok(['add', '--name', 'Rex', '--category-id', '1', '--status', 'available'])
    assert.match(added.stdout, /^ID +NAME +CATEGORY +STATUS\n1 +Rex +1 +available\n$/)
    const [fido] = jsonLines(
      (await ok(['add', '--name', 'Fido the Second', '--category-id', '2', '--json'])).stdout,
    )
    assert.deepEqual(fido, { id: 2, name: 'Fido the Second', categoryId: 2 })
    await ok(['add', '--name', 'Tom', '--category-id', '3', '--status', 'sold'])

    const table = await ok(['list'])
    assert.equal(
      table.stdout,
      [
        'ID  NAME             CATEGORY  STATUS',
        '1   Rex              1         available',
        '2   Fido the Second  2',
        '3   Tom              3         sold',
        '',
      ].join('\n'),
    )
    assert.equal(table.stderr, '')

    const one = await ok(['get', '2', '--json'])
    assert.deepEqual(jsonLines(one.stdout), [fido])
    const sold = await ok(['list', '--status', 'sold', '--json'])
    assert.deepEqual(
      jsonLines(sold.stdout).map((pet) => pet.name),
      ['Tom'],
    )
  })

  test('list pages: one page says more follow; --all follows every Link', async () => {
    const page = await ok(['list', '--limit', '1'])
    assert.equal(page.stdout.split('\n').filter(Boolean).length, 2, 'the header and one pet')
    assert.equal(page.stderr, 'More pets follow: --all lists every page.\n')
    const all = await ok(['list', '--limit', '1', '--all', '--json'])
    const ids = jsonLines(all.stdout).map((pet) => pet.id)
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => Number(a) - Number(b)),
    )
    assert.ok(ids.length >= 3)
    assert.equal(new Set(ids).size, ids.length)
  })

  test('add --idempotency-key: the same key again replays the first pet', async () => {
    const args = [
      'add',
      '--name',
      'Once',
      '--category-id',
      '9',
      '--idempotency-key',
      'smoke-1',
      '--json',
    ]
    const [first] = jsonLines((await ok(args)).stdout)
    const [again] = jsonLines((await ok(args)).stdout)
    assert.deepEqual(again, first)
  })

  test('--url and --key instead of the environment, as a user runs it: a child process', async () => {
    const result = await runCli(
      ['pets', 'list', '--limit', '1', '--json', '--url', `${server.url}/v1/`, '--key', server.key],
      {},
    )
    assert.equal(result.code, 0, result.stderr)
    assert.equal(jsonLines(result.stdout).length, 1)
    assert.equal(result.stderr, KEY_WARNING)
  })

  test('--key KEY works with a warning on stderr; PETSTORE_API_KEY and --key - need none', async () => {
    const { PETSTORE_URL = '' } = env
    const given = await runMain(['pets', 'list', '--json', '--key', server.key], { PETSTORE_URL })
    assert.equal(given.code, 0, given.stderr)
    assert.ok(jsonLines(given.stdout).length > 0)
    assert.equal(given.stderr, KEY_WARNING)
    // Given both, --key wins, and still says what it costs.
    const both = await runMain(['pets', 'list', '--json', '--key', server.key], env)
    assert.equal(both.code, 0, both.stderr)
    assert.equal(both.stderr, KEY_WARNING)

    const fromEnv = await ok(['list', '--json'])
    assert.equal(fromEnv.stderr, '')
  })

  test('--key - reads the key from the first line of standard input', async () => {
    const { PETSTORE_URL = '' } = env
    for (const stdin of [`${server.key}\n`, server.key, `  ${server.key}\r\nthe next line\n`]) {
      const result = await runMain(
        ['pets', 'list', '--limit', '1', '--json', '--key', '-'],
        { PETSTORE_URL },
        stdin,
      )
      assert.equal(result.code, 0, `${JSON.stringify(stdin)}: ${result.stderr}`)
      assert.equal(jsonLines(result.stdout).length, 1)
      assert.equal(result.stderr, '')
    }
    // Standard input wins over the environment, as --key does.
    const wrong = await runMain(['pets', 'list', '--key', '-'], env, 'petstore_live_x\n')
    assert.equal(wrong.code, 1)
    assert.match(wrong.stderr, /^petstore: 401 unauthorized: /)
  })

  test('--key - as a user runs it: a pipe into the real process, left open after the key', async () => {
    const { code, stdout, stderr } = await runCli(
      ['pets', 'list', '--limit', '1', '--json', '--url', `${server.url}/v1`, '--key', '-'],
      {},
      { stdin: `${server.key}\n` },
    )
    assert.equal(code, 0, stderr)
    assert.equal(jsonLines(stdout).length, 1)
    assert.equal(stderr, '')
  })

  test('plain http to another machine: refused naming --allow-insecure-http, which lets it through', async () => {
    const refused = await runMain(['pets', 'list', '--url', 'http://petstore.example.com/v1'], env)
    assert.equal(refused.code, 2)
    assert.equal(
      refused.stderr,
      'petstore: --url (or PETSTORE_URL) is plain http to petstore.example.com, which is not this machine (localhost, 127.0.0.0/8, [::1]): the API key would cross the network unencrypted, readable by anyone on the way; use https, or pass --allow-insecure-http to send it anyway\n' +
        'Run "petstore pets --help" for usage.\n',
    )
    const fromEnv = await runMain(['pets', 'list'], { ...env, PETSTORE_URL: 'http://10.1.2.3/v1' })
    assert.equal(fromEnv.code, 2)
    assert.match(fromEnv.stderr, /plain http to 10\.1\.2\.3, .*--allow-insecure-http/)

    // With the flag, the command goes on to call (0.0.0.0 is not loopback; nothing listens there).
    const port = await closedPort()
    const url = `http://0.0.0.0:${port}/v1`
    const allowed = await runMain(['pets', 'list', '--url', url, '--allow-insecure-http'], env)
    assert.equal(allowed.code, 1, allowed.stderr)
    assert.match(
      allowed.stderr,
      /^petstore: network_error: GET http:\/\/0\.0\.0\.0:\d+\/v1\/pets failed/,
    )
    // Loopback needs no flag (https neither: test/client/sdk.test.ts).
    assert.equal(
      (await ok(['list', '--url', `${server.url.replace('127.0.0.1', 'localhost')}/v1`])).code,
      0,
    )
  })

  test("a failed call is one line with the service's request id, exit 1", async () => {
    const missing = await runMain(['pets', 'get', '424242'], env)
    assert.equal(missing.code, 1)
    assert.equal(missing.stdout, '')
    assert.match(
      missing.stderr,
      /^petstore: 404 not_found: no pet with id 424242 \(request id [\w.:-]+\)\n$/,
    )
    const refused = await runMain(['pets', 'list'], { ...env, PETSTORE_API_KEY: 'petstore_live_x' })
    assert.equal(refused.code, 1)
    assert.match(refused.stderr, /^petstore: 401 unauthorized: .+ \(request id [\w.:-]+\)\n$/)
    const invalid = await runMain(['pets', 'add', '--name', ' ', '--category-id', '1'], env)
    assert.equal(invalid.code, 1)
    assert.match(
      invalid.stderr,
      /^petstore: 400 invalid_request: .*name.* \(request id [\w.:-]+\)\n$/,
    )
  })

  test('usage errors: one line and a pointer to the help, exit 2', async () => {
    const cases: [string[], Record<string, string>, RegExp][] = [
      [['pets'], env, /^pets needs a subcommand: list, add or get$/],
      [['pets', 'delete'], env, /^unknown pets subcommand "delete"/],
      [['pets', 'list'], {}, /^pets needs the service's address: --url or PETSTORE_URL/],
      [['pets', 'list'], { PETSTORE_URL: env.PETSTORE_URL ?? '' }, /^pets needs an API key/],
      [
        ['pets', 'list', '--key', '-'],
        { PETSTORE_URL: env.PETSTORE_URL ?? '' },
        /^--key - reads the API key from standard input, whose first line is empty$/,
      ],
      [
        ['pets', 'list', '--key', '-', '--url', 'http://example.com/v1'],
        env,
        /^--url \(or PETSTORE_URL\) is plain http to example\.com, .* pass --allow-insecure-http /,
      ],
      [
        ['pets', 'list', '--url', server.url],
        env,
        /^--url \(or PETSTORE_URL\) must be .* ending in \/v1/,
      ],
      [['pets', 'list', '--limit', '0'], env, /^--limit must be a whole number from 1 to 100/],
      [['pets', 'list', '--status', 'lost'], env, /^--status must be available, pending or sold/],
      [['pets', 'list', '--name', 'x'], env, /^unknown option "--name"$/],
      [['pets', 'add', '--name', 'x'], env, /^pets add needs --name NAME and --category-id ID$/],
      [
        ['pets', 'add', '--name', 'x', '--category-id', '1.5'],
        env,
        /^--category-id must be a whole number/,
      ],
      [['pets', 'get'], env, /^pets get needs one argument/],
      [['pets', 'get', 'abc'], env, /^the id must be a whole number/],
    ]
    await Promise.all(
      cases.map(async ([args, environment, message]) => {
        const result = await runMain(args, environment)
        assert.equal(result.code, 2, args.join(' '))
        assert.equal(result.stdout, '')
        const [line, pointer, ...rest] = result.stderr.split('\n')
        assert.match((line ?? '').replace(/^petstore: /, ''), message, args.join(' '))
        assert.equal(pointer, 'Run "petstore pets --help" for usage.')
        assert.deepEqual(rest, [''])
      }),
    )
  })

  test('--help: its own text, exit 0', async () => {
    for (const args of [
      ['pets', '--help'],
      ['pets', 'list', '-h'],
      ['help', 'pets'],
    ]) {
      const result = await runMain(args, {})
      assert.equal(result.code, 0)
      assert.match(result.stdout, /^Usage: petstore pets list \[--status S\]/)
      assert.match(result.stdout, /PETSTORE_API_KEY/)
      assert.match(result.stdout, /--key - +the API key from standard input/)
      assert.match(result.stdout, /--allow-insecure-http +let --url be plain http/)
    }
    const overview = await runMain(['--help'], {})
    assert.match(overview.stdout, /pets list\|add\|get/)
  })
})

test("--trace: each command's requests carry a new traceparent, whose trace id it prints and the service logs", async () => {
  const log = memoryLog()
  const server = await startServer({
    logger: { ...loggerOptions({ logLevel: 'info' }), stream: log.stream },
  })
  try {
    const env = { PETSTORE_URL: `${server.url}/v1`, PETSTORE_API_KEY: server.key }
    const added = await runMain(
      ['pets', 'add', '--name', 'Rex', '--category-id', '1', '--trace'],
      env,
    )
    const listed = await runMain(['pets', 'list', '--all', '--json', '--trace'], env)
    const traceIds = [added, listed].map((result) => {
      assert.equal(result.code, 0, result.stderr)
      return /^trace ([0-9a-f]{32})$/m.exec(result.stderr)?.[1]
    })
    assert.ok(traceIds[0] && traceIds[1] && traceIds[0] !== traceIds[1], 'a new trace per command')
    const logged = log.lines().filter((line) => line.msg === 'request completed')
    for (const [i, path] of [
      [0, '/v1/pets'],
      [1, '/v1/pets'],
    ] as const) {
      assert.ok(
        logged.some((line) => line.traceId === traceIds[i] && String(line.url).startsWith(path)),
        `the service logged trace ${traceIds[i]}`,
      )
    }
    const plain = await runMain(['pets', 'list'], env)
    assert.doesNotMatch(plain.stderr, /^trace /m, 'no trace line without --trace')
  } finally {
    await server.close()
  }
})
