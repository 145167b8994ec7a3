// The Configuration table (docs/configuration.md) and the "Limits and rules" table (docs/api.md)
// against the code, as the error table is checked against the catalog (openapi.test.ts): every
// variable loadConfig reads is listed,
// with the default of `configDefaults`, and every range the table states is the one loadConfig
// enforces (its ends accepted, one past them refused naming the variable). The limits stated
// are those of src/contract/limits.ts and of the running service, as are the timeouts and sizes
// the Errors table quotes. Beside the operations table, the methods it says are not part of the
// interface are 405s, and the root document it shows is what `GET /` answers.
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { after, before, describe, test } from 'node:test'
import { ConfigError, configDefaults, loadConfig } from '../src/config.ts'
import { BODY_LIMIT_BYTES, LIST_LIMIT, MAX_ID, NAME_MAX_LENGTH } from '../src/contract/limits.ts'
import { PetStatus } from '../src/contract/schemas.ts'
import { MAX_TARGET_LENGTH } from '../src/http/http-server.ts'
import { variablesRead } from './helpers/config-variables.ts'
import { startServer, type TestServer } from './helpers/server.ts'

const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8')
const configurationPage = await readFile(
  new URL('../docs/configuration.md', import.meta.url),
  'utf8',
)
const apiPage = await readFile(new URL('../docs/api.md', import.meta.url), 'utf8')

/** The rows of the first table after `heading` in `page`, as trimmed cells, header and rule left out. */
function tableAfter(heading: string, page = readme): string[][] {
  const start = page.indexOf(`\n${heading}\n`)
  assert.ok(start >= 0, `the page has a "${heading}" section`)
  const lines = page.slice(start).split('\n')
  const first = lines.findIndex((line) => line.startsWith('|'))
  const end = lines.findIndex((line, i) => i > first && !line.startsWith('|'))
  return lines.slice(first + 2, end).map((line) =>
    line
      .split('|')
      .slice(1, -1)
      .map((cell) => cell.trim()),
  )
}

/** The values written in backticks in a cell, in order. */
function quoted(cell: string): string[] {
  return [...cell.matchAll(/`([^`]+)`/g)].map(([, value]) => value ?? '')
}

/**
 * The ConfigError loadConfig throws for `name=value`; undefined when it takes it. `beside`: other
 * variables a value needs to be valid (D16: the headers timeout is not past the request's).
 */
function refusal(
  name: string,
  value: string,
  beside: Record<string, string> = {},
): string | undefined {
  try {
    loadConfig({ ...beside, [name]: value })
    return undefined
  } catch (err) {
    assert.ok(err instanceof ConfigError, `${name}=${value}: ${String(err)}`)
    return err.message
  }
}

/** Both timeouts at `value`, so that either one's range can be tried alone. */
function besideFor(name: string, value: string): Record<string, string> {
  return name === 'PETSTORE_HEADERS_TIMEOUT_MS' || name === 'PETSTORE_REQUEST_TIMEOUT_MS'
    ? { PETSTORE_HEADERS_TIMEOUT_MS: value, PETSTORE_REQUEST_TIMEOUT_MS: value }
    : {}
}

describe('the Configuration table (docs/configuration.md)', () => {
  const rows = tableAfter('## Variables', configurationPage).map(
    ([variable = '', byDefault = '', meaning = '']) => ({
      name: /^`([A-Z_]+)`$/.exec(variable)?.[1] ?? variable,
      byDefault,
      meaning,
    }),
  )

  test('lists exactly the variables loadConfig reads, each once', () => {
    const names = rows.map(({ name }) => name)
    assert.equal(new Set(names).size, names.length, names.join(', '))
    assert.deepEqual([...names].sort(), variablesRead())
  })

  test('gives each variable the default of configDefaults, and none where it has none', () => {
    const defaults: Record<string, string> = configDefaults
    for (const { name, byDefault } of rows) {
      const value = defaults[name]
      if (value === undefined) {
        assert.doesNotMatch(byDefault, /^`[^`]*`$/, `${name} has no default in src/config.ts`)
      } else {
        assert.equal(byDefault, `\`${value}\``, name)
      }
    }
  })

  test('states the range loadConfig enforces for every number: its ends taken, past them refused', () => {
    const defaults: Record<string, string> = configDefaults
    const numeric = rows.filter(({ name }) => /^\d+$/.test(defaults[name] ?? ''))
    assert.ok(numeric.length >= 8, `numeric variables: ${numeric.map(({ name }) => name)}`)
    for (const { name, meaning } of numeric) {
      const range = /\b(\d+) to (\d+)\b/.exec(meaning)
      assert.ok(range, `${name}: the README states no range`)
      const [min, max] = [Number(range[1]), Number(range[2])]
      for (const end of [String(min), String(max)]) {
        assert.equal(
          refusal(name, end, besideFor(name, end)),
          undefined,
          `${name}=${end} is refused`,
        )
      }
      for (const outside of [min - 1, max + 1]) {
        assert.match(
          refusal(name, String(outside)) ?? 'taken',
          new RegExp(`^${name} `),
          `${name}=${outside}`,
        )
      }
    }
  })

  test('lists exactly the values a variable with a closed list takes', () => {
    const closed = rows
      .map((row) => ({ ...row, refused: refusal(row.name, 'not-a-value') }))
      .map((row) => ({ ...row, allowed: /must be one of (.+) \(got/.exec(row.refused ?? '')?.[1] }))
      .filter((row) => row.allowed !== undefined)
    assert.deepEqual(
      closed.map(({ name }) => name),
      [
        'DATABASE_POOLER',
        'PETSTORE_MIGRATE',
        'PETSTORE_ENV',
        'LOG_LEVEL',
        'OTEL_EXPORTER_OTLP_PROTOCOL',
        'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
        'OTEL_TRACES_SAMPLER',
      ],
    )
    for (const { name, meaning, allowed } of closed) {
      assert.deepEqual(
        quoted(meaning).slice(0, allowed?.split(', ').length),
        allowed?.split(', '),
        name,
      )
    }
  })
})

describe('the Limits and rules table (docs/api.md)', () => {
  const rows = new Map(
    tableAfter('## Limits and rules', apiPage).map(
      ([what = '', rule = '']) => [what, rule] as const,
    ),
  )
  const rule = (what: string): string => {
    const text = rows.get(what)
    assert.ok(text !== undefined, `no row for ${what}`)
    return text
  }
  let server: TestServer

  before(async () => {
    server = await startServer({ rateLimit: Number(configDefaults.PETSTORE_RATE_LIMIT) })
  })
  after(() => server.close())

  test('limit: the range and default of LIST_LIMIT', () => {
    assert.match(
      rule('`limit`'),
      new RegExp(
        `^an integer from ${LIST_LIMIT.minimum} to ${LIST_LIMIT.maximum}, default ${LIST_LIMIT.default},`,
      ),
    )
  })

  test('status: the values of PetStatus', () => {
    const values = quoted(rule('`status`'))
    assert.deepEqual(values, [...PetStatus.enum])
  })

  test('name: 1 to NAME_MAX_LENGTH characters', () => {
    assert.match(rule('`name`'), new RegExp(`^1 to ${NAME_MAX_LENGTH} characters`))
  })

  test('categoryId and id: 1 to MAX_ID', () => {
    assert.match(rule('`categoryId`, `id`'), new RegExp(`from 1 to ${MAX_ID} \\(2\\^53 − 1\\)`))
    assert.equal(MAX_ID, 2 ** 53 - 1)
  })

  test('request body: BODY_LIMIT_BYTES, in KiB', () => {
    assert.match(rule('request body'), new RegExp(`^at most ${BODY_LIMIT_BYTES / 1024} KiB of`))
  })

  test('rate limit: the default quota, and the fields the service sends', async () => {
    const text = rule('rate limit')
    assert.match(
      text,
      new RegExp(
        `^\`PETSTORE_RATE_LIMIT\` requests a minute per key, ${configDefaults.PETSTORE_RATE_LIMIT} by default`,
      ),
    )
    const response = await server.request('/v1/pets')
    await response.body?.cancel()
    const policy = response.headers.get('ratelimit-policy')
    assert.ok(policy !== null)
    assert.ok(text.includes(`\`RateLimit-Policy: ${policy}\``), `${policy} in: ${text}`)
  })
})

describe('the limits the Errors table (docs/api.md) states', () => {
  const rows = new Map(
    tableAfter('## Errors', apiPage).map(([code = '', , when = '']) => [code, when] as const),
  )
  const seconds = (ms: string) => Number(ms) / 1000

  test('408: the default headers and request timeouts', () => {
    assert.match(
      rows.get('`request_timeout`') ?? '',
      new RegExp(
        `\\(headers ${seconds(configDefaults.PETSTORE_HEADERS_TIMEOUT_MS)} s, whole request ${seconds(configDefaults.PETSTORE_REQUEST_TIMEOUT_MS)} s\\)`,
      ),
    )
  })

  test('413: BODY_LIMIT_BYTES; 414: MAX_TARGET_LENGTH', () => {
    assert.match(
      rows.get('`payload_too_large`') ?? '',
      new RegExp(`over ${BODY_LIMIT_BYTES / 1024} KiB`),
    )
    assert.match(
      rows.get('`uri_too_long`') ?? '',
      new RegExp(`longer than ${MAX_TARGET_LENGTH / 1024} KiB`),
    )
  })
})

describe("what the README's API section says besides its tables", () => {
  const api = readme.slice(readme.indexOf('\n## The API\n'), readme.indexOf('\n## Client SDK\n'))
  let server: TestServer

  before(async () => {
    server = await startServer()
  })
  after(() => server.close())

  test('the methods it says are not part of the interface are not in the document, and are 405 with Allow', async () => {
    const sentence = /These three are the whole interface:[\s\S]*?\n\n/.exec(api)?.[0] ?? ''
    assert.match(sentence, /updating and deleting pets are not part of it/)
    const named = quoted(sentence)
    const methods = named.filter((value) => /^[A-Z]+$/.test(value))
    const paths = named.filter((value) => value.startsWith('/'))
    assert.deepEqual(methods, ['PUT', 'PATCH', 'DELETE'])
    assert.deepEqual(paths, ['/v1/pets', '/v1/pets/{petId}'])
    const document = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as {
      paths: Record<string, Record<string, unknown>>
    }
    for (const path of paths) {
      const operations = document.paths[path.replace(/^\/v1/, '')]
      assert.ok(operations, `${path} is in the document`)
      for (const method of methods) {
        assert.equal(operations[method.toLowerCase()], undefined, `${method} ${path} is documented`)
        const response = await server.request(path.replace('{petId}', '1'), { method })
        await response.body?.cancel()
        assert.equal(response.status, 405, `${method} ${path}`)
        assert.ok(!response.headers.get('allow')?.includes(method), `${method} ${path}`)
      }
    }
  })

  test('the root document it shows is what GET / answers', async () => {
    const shown = /`GET \/` says where those are[^`]*`([^`]+)`/.exec(api)?.[1]
    assert.ok(shown, 'the README shows the root document')
    const response = await fetch(`${server.url}/`)
    assert.equal(response.status, 200)
    assert.deepEqual(await response.json(), JSON.parse(shown))
  })
})
