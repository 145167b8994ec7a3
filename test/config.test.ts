// D9: loadConfig is a pure function of the environment, so every bad value is tested here rather
// than by starting a process; cli.test.ts starts one to show how such a line reaches the
// operator (stderr, exit code 1). The other config-*.test.ts files test the variables with more
// rules of their own.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { ConfigError, loadConfig } from '../src/config.ts'
import { generateApiKey } from '../src/keys/api-key.ts'

/** The one line loadConfig stops the start with. */
function refusal(env: Record<string, string>): string {
  try {
    loadConfig(env)
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err))
    assert.doesNotMatch(err.message, /\n/, 'one line')
    return err.message
  }
  assert.fail(`${JSON.stringify(env)} was taken`)
}

describe('loadConfig', () => {
  test('with nothing set: the defaults', () => {
    const config = loadConfig({})
    assert.equal(config.port, 8080)
    assert.deepEqual(config.database, { engine: 'sqlite', path: './data/petstore.db' })
    assert.equal(config.env, 'production')
    assert.deepEqual(config.apiKeys, [])
    assert.equal(config.rateLimit, 600)
    assert.equal(config.logLevel, 'info')
    assert.deepEqual(config.corsOrigins, [])
    assert.equal(config.idempotencyTtlSeconds, 86_400)
    assert.ok(Object.isFrozen(config))
  })

  test('each variable is taken as given, around white space', () => {
    const key = 'k'.repeat(32)
    const config = loadConfig({
      PORT: ' 0 ',
      DATABASE_URL: 'sqlite::memory:',
      PETSTORE_ENV: 'staging',
      PETSTORE_API_KEYS: ` ${key} ,, ${'j'.repeat(40)} `,
      PETSTORE_RATE_LIMIT: '0',
      LOG_LEVEL: 'silent',
      PETSTORE_CORS_ORIGINS: 'https://app.example.com, http://localhost:3000',
      PETSTORE_IDEMPOTENCY_TTL: '60',
    })
    assert.equal(config.port, 0)
    assert.deepEqual(config.database, { engine: 'sqlite', path: ':memory:' })
    assert.equal(config.env, 'staging')
    assert.deepEqual(config.apiKeys, [key, 'j'.repeat(40)])
    assert.equal(config.rateLimit, 0)
    assert.equal(config.logLevel, 'silent')
    assert.deepEqual(config.corsOrigins, ['https://app.example.com', 'http://localhost:3000'])
    assert.equal(config.idempotencyTtlSeconds, 60)
    assert.deepEqual(loadConfig({ PETSTORE_CORS_ORIGINS: '*' }).corsOrigins, ['*'])
  })

  for (const [name, value, expected] of [
    ['PORT', 'abc', /^PORT must be an integer from 0 to 65535 \(got "abc"\)$/],
    ['PORT', '65536', /^PORT must be an integer from 0 to 65535/],
    ['DATABASE_URL', 'mysql://x', /^DATABASE_URL must be sqlite:<path>/],
    ['DATABASE_URL', 'sqlite:', /^DATABASE_URL sqlite: needs a path/],
    ['PETSTORE_ENV', 'prod', /^PETSTORE_ENV must be one of production, staging \(got "prod"\)$/],
    ['PETSTORE_RATE_LIMIT', '-1', /^PETSTORE_RATE_LIMIT must be an integer from 0 to 1000000/],
    ['PETSTORE_RATE_LIMIT', '1.5', /^PETSTORE_RATE_LIMIT must be an integer/],
    [
      'LOG_LEVEL',
      'loud',
      /^LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent/,
    ],
    ['PETSTORE_API_KEYS', 'short', /^PETSTORE_API_KEYS entry 1 must be at least 32 characters/],
    [
      'PETSTORE_API_KEYS',
      `${'k'.repeat(32)},with white space ${'x'.repeat(32)}`,
      /^PETSTORE_API_KEYS entry 2 must be at least 32 characters with no white space$/,
    ],
    ['PETSTORE_CORS_ORIGINS', 'example.com', /^PETSTORE_CORS_ORIGINS entry "example.com" must be/],
    [
      'PETSTORE_CORS_ORIGINS',
      'https://app.example.com/path',
      /^PETSTORE_CORS_ORIGINS entry "https:\/\/app\.example\.com\/path" must be an origin/,
    ],
    [
      'PETSTORE_IDEMPOTENCY_TTL',
      '0',
      /^PETSTORE_IDEMPOTENCY_TTL must be an integer from 1 to 604800/,
    ],
  ] as const) {
    test(`${name}=${JSON.stringify(value)} stops the start with one line naming it`, () => {
      assert.match(refusal({ [name]: value }), expected)
    })
  }

  test('a CLI-format key of the other environment, or with a wrong checksum, is refused', () => {
    const staging = generateApiKey('staging')
    assert.match(
      refusal({ PETSTORE_API_KEYS: staging }),
      /^PETSTORE_API_KEYS entry 1 is a staging key; this service runs as production$/,
    )
    assert.deepEqual(loadConfig({ PETSTORE_API_KEYS: staging, PETSTORE_ENV: 'staging' }).apiKeys, [
      staging,
    ])
    const mistyped = `${staging.slice(0, -1)}${staging.endsWith('A') ? 'B' : 'A'}`
    assert.match(
      refusal({ PETSTORE_API_KEYS: mistyped, PETSTORE_ENV: 'staging' }),
      /^PETSTORE_API_KEYS entry 1 has a petstore prefix but a wrong checksum$/,
    )
  })
})
