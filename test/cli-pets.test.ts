// `petstore pets list|add|get` (D18), against a service listening on a port: in-process (main
// with captured output, helpers/in-process.ts), which saves a Node.js start per case, and once
// as an operator runs it, the real command as a child process.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { runMain } from './helpers/in-process.ts'
import { runCli } from './helpers/process.ts'
import { startServer, type TestServer } from './helpers/server.ts'

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
    }
    const overview = await runMain(['--help'], {})
    assert.match(overview.stdout, /pets list\|add\|get/)
  })
})
