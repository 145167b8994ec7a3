// D9: loadConfig is a pure function of the environment (and of the file PETSTORE_API_KEYS_FILE
// names), so every bad value is tested here rather
// than by starting a process; cli.test.ts starts one to show how such a line reaches the
// operator (stderr, exit code 1). The describes after the first test the variables with more
// rules of their own, one a variable or group.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { ConfigError, KNOWN_VARIABLES, loadConfig } from '../src/config.ts'
import { generateApiKey } from '../src/contract/api-key.ts'
import { variablesRead } from './helpers/config-variables.ts'

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
    assert.deepEqual(config.trustedProxies, [])
    assert.equal(config.livenessStallMs, 10_000)
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
      PETSTORE_TRUSTED_PROXIES: ' 10.0.0.0/8, 192.0.2.1 ,fd00::/8',
    })
    assert.equal(config.port, 0)
    assert.deepEqual(config.trustedProxies, ['10.0.0.0/8', '192.0.2.1', 'fd00::/8'])
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
    ['PETSTORE_API_KEYS', 'short', /^PETSTORE_API_KEYS entry 1 must be 32 to 505 characters/],
    [
      'PETSTORE_API_KEYS',
      `${'k'.repeat(32)},with white space ${'x'.repeat(32)}`,
      /^PETSTORE_API_KEYS entry 2 must be 32 to 505 characters with no white space \(Authorization: Bearer <key> is at most 512\)$/,
    ],
    [
      'PETSTORE_API_KEYS',
      'k'.repeat(506),
      /^PETSTORE_API_KEYS entry 1 must be 32 to 505 characters/,
    ],
    ['PETSTORE_CORS_ORIGINS', 'example.com', /^PETSTORE_CORS_ORIGINS entry "example.com" must be/],
    [
      'PETSTORE_TRUSTED_PROXIES',
      '10.0.0.0/8, proxy.internal',
      /^PETSTORE_TRUSTED_PROXIES entry "proxy.internal" must be an IP address or a CIDR range/,
    ],
    [
      'PETSTORE_LIVENESS_STALL_MS',
      '499',
      /^PETSTORE_LIVENESS_STALL_MS must be an integer from 500 to 600000/,
    ],
    ['PETSTORE_TRUSTED_PROXIES', '10.0.0.0/33', /^PETSTORE_TRUSTED_PROXIES entry "10.0.0.0\/33"/],
    ['PETSTORE_TRUSTED_PROXIES', 'fd00::/129', /^PETSTORE_TRUSTED_PROXIES entry "fd00::\/129"/],
    [
      'PETSTORE_TRUSTED_PROXIES',
      '0.0.0.0/0',
      /^PETSTORE_TRUSTED_PROXIES entry "0.0.0.0\/0" trusts every address/,
    ],
    ['PETSTORE_TRUSTED_PROXIES', '::/0', /^PETSTORE_TRUSTED_PROXIES entry "::\/0" trusts every/],
    // Ranges that cover a whole family together trust everyone as a /0 does.
    [
      'PETSTORE_TRUSTED_PROXIES',
      '0.0.0.0/1, 128.0.0.0/1',
      /^PETSTORE_TRUSTED_PROXIES entries "0.0.0.0\/1", "128.0.0.0\/1" trust every IPv4 address; name the balancers' addresses or subnet$/,
    ],
    [
      'PETSTORE_TRUSTED_PROXIES',
      '10.0.0.0/8,0.0.0.0/2,64.0.0.0/2,128.0.0.0/2,192.0.0.0/2',
      /^PETSTORE_TRUSTED_PROXIES entries "10.0.0.0\/8", "0.0.0.0\/2", .* trust every IPv4 address/,
    ],
    // A dual-stack socket gives every IPv4 peer as ::ffff:a.b.c.d.
    [
      'PETSTORE_TRUSTED_PROXIES',
      '::ffff:0:0/96',
      /^PETSTORE_TRUSTED_PROXIES entry "::ffff:0:0\/96" trusts every IPv4 address/,
    ],
    [
      'PETSTORE_TRUSTED_PROXIES',
      '::ffff:0.0.0.0/97, 128.0.0.0/1',
      /^PETSTORE_TRUSTED_PROXIES entries "::ffff:0.0.0.0\/97", "128.0.0.0\/1" trust every IPv4 address/,
    ],
    [
      'PETSTORE_TRUSTED_PROXIES',
      '::/1',
      /^PETSTORE_TRUSTED_PROXIES entry "::\/1" trusts every IPv4 address/,
    ],
    [
      'PETSTORE_TRUSTED_PROXIES',
      '::/1, 8000::/1',
      /^PETSTORE_TRUSTED_PROXIES entries "::\/1", "8000::\/1" trust every IPv6 address/,
    ],
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

  test('PETSTORE_TRUSTED_PROXIES: ranges that leave any address out are accepted', () => {
    for (const value of [
      '0.0.0.0/1, 128.0.0.0/2, 192.0.0.0/3',
      '::ffff:0:0/97, 10.0.0.0/8',
      '::ffff:10.0.0.0/104, 127.0.0.1',
      '8000::/1, 4000::/2',
      '0.0.0.0/1, 128.0.0.1/32',
    ]) {
      assert.doesNotThrow(() => loadConfig({ PETSTORE_TRUSTED_PROXIES: value }), value)
    }
  })

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

// HOST (D9): an IP literal or an RFC 1123 host name, checked at start with one clear line.

describe('PETSTORE_API_KEYS_FILE: the keys from a file, such as a mounted Secret', () => {
  const folder = mkdtempSync(join(tmpdir(), 'petstore-keys-'))
  after(() => rmSync(folder, { recursive: true, force: true }))
  const file = (name: string, text: string) => {
    const path = join(folder, name)
    writeFileSync(path, text)
    return path
  }
  const [one, two] = ['k'.repeat(32), 'j'.repeat(40)]

  test('keys separated by line breaks or commas, around white space, as PETSTORE_API_KEYS has them', () => {
    const path = file('keys', ` ${one}\r\n\n${two} ,\n`)
    assert.deepEqual(loadConfig({ PETSTORE_API_KEYS_FILE: path }).apiKeys, [one, two])
    const commas = file('commas', `${one},${two}`)
    assert.deepEqual(loadConfig({ PETSTORE_API_KEYS_FILE: ` ${commas} ` }).apiKeys, [one, two])
    assert.deepEqual(loadConfig({ PETSTORE_API_KEYS_FILE: file('empty', '\n') }).apiKeys, [])
    // Empty, it is not set.
    assert.deepEqual(loadConfig({ PETSTORE_API_KEYS_FILE: '', PETSTORE_API_KEYS: one }).apiKeys, [
      one,
    ])
  })

  test("each key is checked as PETSTORE_API_KEYS's, the line naming the file's variable", () => {
    assert.match(
      refusal({ PETSTORE_API_KEYS_FILE: file('short', `${one}\nshort\n`) }),
      /^PETSTORE_API_KEYS_FILE entry 2 must be 32 to 505 characters/,
    )
    const staging = generateApiKey('staging')
    assert.equal(
      refusal({ PETSTORE_API_KEYS_FILE: file('staging', staging) }),
      'PETSTORE_API_KEYS_FILE entry 1 is a staging key; this service runs as production',
    )
  })

  test('a file that cannot be read, or both variables set, stops the start in one line', () => {
    const missing = join(folder, 'missing')
    assert.equal(
      refusal({ PETSTORE_API_KEYS_FILE: missing }),
      `PETSTORE_API_KEYS_FILE ${missing} cannot be read (ENOENT)`,
    )
    assert.equal(
      refusal({ PETSTORE_API_KEYS_FILE: file('both', one), PETSTORE_API_KEYS: two }),
      'PETSTORE_API_KEYS and PETSTORE_API_KEYS_FILE are both set; set one',
    )
  })
})

describe('HOST', () => {
  test('defaults to 127.0.0.1; IPv4 and IPv6 literals and host names are taken as given', () => {
    assert.equal(loadConfig({}).host, '127.0.0.1')
    for (const host of [
      '0.0.0.0',
      '10.1.2.3',
      '::',
      '::1',
      'fe80::1%eth0',
      '::ffff:192.0.2.1',
      'localhost',
      'api-1.internal',
      'petstore.example.com.',
      '3com.example',
      `${'a'.repeat(63)}.example`,
    ]) {
      assert.equal(loadConfig({ HOST: host }).host, host)
    }
    assert.equal(loadConfig({ HOST: '  ::1 ' }).host, '::1', 'surrounding white space is trimmed')
  })

  test('anything else is one line naming HOST and repeating the value', () => {
    for (const bad of [
      'bad host!',
      'http://0.0.0.0',
      '0.0.0.0:8080',
      '[::1]',
      '127.0.0.256',
      '1.2.3',
      '-api.internal',
      'api-.internal',
      'api..internal',
      'api_1.internal',
      `${'a'.repeat(64)}.example`,
      `${'abcdefghi.'.repeat(25)}example`,
      'café.example',
      'a\nb',
    ]) {
      assert.throws(
        () => loadConfig({ HOST: bad }),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError)
          assert.match(err.message, /^HOST must be an IP address .* or a host name \(got ".*"\)$/)
          assert.ok(err.message.includes(JSON.stringify(bad)), err.message)
          assert.ok(!err.message.includes('\n'), 'one line, whatever the value holds')
          return true
        },
        bad,
      )
    }
  })
})

// DATABASE_URL and DATABASE_POOL_SIZE (D9): PostgreSQL locations are validated at start.

describe('DATABASE_URL for PostgreSQL', () => {
  test('postgres:// and postgresql:// with DATABASE_POOL_SIZE', () => {
    const url = 'postgresql://app:secret@db.internal:6432/petstore?sslmode=require'
    assert.deepEqual(loadConfig({ DATABASE_URL: url, DATABASE_POOL_SIZE: '25' }).database, {
      engine: 'postgres',
      url,
      poolSize: 25,
      pooler: 'none',
    })
    assert.equal(loadConfig({ DATABASE_URL: 'postgres://db/petstore' }).database.engine, 'postgres')
  })

  test('the pool size defaults to 10 and must be 1 to 1000', () => {
    const database = loadConfig({ DATABASE_URL: 'postgres://db/petstore' }).database
    assert.equal(database.engine === 'postgres' && database.poolSize, 10)
    for (const bad of ['0', '1001', 'ten', '-1']) {
      assert.throws(
        () => loadConfig({ DATABASE_URL: 'postgres://db/petstore', DATABASE_POOL_SIZE: bad }),
        /DATABASE_POOL_SIZE must be an integer from 1 to 1000/,
      )
    }
  })

  test('DATABASE_POOLER is none (direct) unless transaction (D19)', () => {
    const pooler = (value?: string) => {
      const database = loadConfig({
        DATABASE_URL: 'postgres://db/petstore',
        ...(value === undefined ? {} : { DATABASE_POOLER: value }),
      }).database
      return database.engine === 'postgres' ? database.pooler : undefined
    }
    assert.equal(pooler(), 'none')
    assert.equal(pooler('transaction'), 'transaction')
    assert.throws(() => pooler('session'), /DATABASE_POOLER must be one of none, transaction/)
  })

  test('a malformed URL is one clear line that does not repeat the password', () => {
    for (const bad of [
      'postgres://app:secret@/petstore',
      'postgres://app:secret@db',
      'postgres://',
    ]) {
      assert.throws(
        () => loadConfig({ DATABASE_URL: bad }),
        (err: Error) =>
          /DATABASE_URL is not a valid PostgreSQL URL/.test(err.message) &&
          !err.message.includes('secret') &&
          !err.message.includes('\n'),
      )
    }
  })
})

// D16's connection limits (D9: validated at start, one clear line on error).

describe('connection limits', () => {
  test('defaults: 4096 connections, headers within 10 s, a whole request within 30 s', () => {
    assert.deepEqual(loadConfig({}).connections, {
      maxConnections: 4096,
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
    })
  })

  test('each can be set', () => {
    const { connections } = loadConfig({
      PETSTORE_MAX_CONNECTIONS: '100',
      PETSTORE_HEADERS_TIMEOUT_MS: '500',
      PETSTORE_REQUEST_TIMEOUT_MS: '500',
    })
    assert.deepEqual(connections, {
      maxConnections: 100,
      headersTimeoutMs: 500,
      requestTimeoutMs: 500,
    })
  })

  test('bad values are one line naming the variable', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ PETSTORE_MAX_CONNECTIONS: '0' }, /^PETSTORE_MAX_CONNECTIONS must be an integer/],
      [{ PETSTORE_MAX_CONNECTIONS: 'lots' }, /^PETSTORE_MAX_CONNECTIONS/],
      [{ PETSTORE_HEADERS_TIMEOUT_MS: '10s' }, /^PETSTORE_HEADERS_TIMEOUT_MS/],
      [
        { PETSTORE_REQUEST_TIMEOUT_MS: '99' },
        /^PETSTORE_REQUEST_TIMEOUT_MS must be an integer from 100/,
      ],
      [
        { PETSTORE_HEADERS_TIMEOUT_MS: '20000', PETSTORE_REQUEST_TIMEOUT_MS: '10000' },
        /^PETSTORE_HEADERS_TIMEOUT_MS \(20000\) must not exceed PETSTORE_REQUEST_TIMEOUT_MS/,
      ],
    ]
    for (const [env, message] of cases) {
      assert.throws(
        () => loadConfig(env),
        (err: unknown) =>
          err instanceof ConfigError && message.test(err.message) && !err.message.includes('\n'),
      )
    }
  })
})

// PETSTORE_MAX_EVENT_LOOP_DELAY_MS (D9, D16): the load-shedding threshold, validated at start.

test('PETSTORE_MAX_EVENT_LOOP_DELAY_MS: 200 ms by default, 0 turns shedding off', () => {
  assert.equal(loadConfig({}).maxEventLoopDelayMs, 200)
  assert.equal(loadConfig({ PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '' }).maxEventLoopDelayMs, 200)
  assert.equal(loadConfig({ PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '0' }).maxEventLoopDelayMs, 0)
  assert.equal(loadConfig({ PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '500' }).maxEventLoopDelayMs, 500)
})

test('PETSTORE_MAX_EVENT_LOOP_DELAY_MS: anything but an integer from 0 to 60000 stops the start', () => {
  for (const bad of ['-1', '1.5', '100ms', '60001', 'off']) {
    assert.throws(
      () => loadConfig({ PETSTORE_MAX_EVENT_LOOP_DELAY_MS: bad }),
      (err: unknown) =>
        err instanceof ConfigError &&
        err.message ===
          `PETSTORE_MAX_EVENT_LOOP_DELAY_MS must be an integer from 0 to 60000 (got "${bad}")`,
      bad,
    )
  }
})

// METRICS_PORT and METRICS_HOST (D17): a listener of its own, checked at start with one line.

describe('METRICS_PORT and METRICS_HOST', () => {
  test('default to port 9464 on loopback, whatever HOST is; off disables; METRICS_HOST is taken as given', () => {
    assert.deepEqual(loadConfig({}).metrics, { port: 9464, host: '127.0.0.1' })
    // Metrics need no key: HOST=0.0.0.0 (a container's) does not put them on the network.
    assert.deepEqual(loadConfig({ HOST: '0.0.0.0' }).metrics, { port: 9464, host: '127.0.0.1' })
    assert.deepEqual(loadConfig({ HOST: '0.0.0.0', METRICS_HOST: '0.0.0.0' }).metrics, {
      port: 9464,
      host: '0.0.0.0',
    })
    assert.equal(loadConfig({ HOST: '0.0.0.0', PROBE_PORT: '8081' }).probes?.host, '0.0.0.0')
    assert.deepEqual(loadConfig({ HOST: '0.0.0.0', METRICS_HOST: '10.0.0.5' }).metrics, {
      port: 9464,
      host: '10.0.0.5',
    })
    assert.deepEqual(loadConfig({ METRICS_PORT: ' 9100 ' }).metrics, {
      port: 9100,
      host: '127.0.0.1',
    })
    assert.equal(loadConfig({ METRICS_PORT: 'off' }).metrics, undefined)
    assert.equal(loadConfig({ METRICS_PORT: 'OFF' }).metrics, undefined)
    assert.equal(loadConfig({ PORT: '0', METRICS_PORT: '0' }).metrics?.port, 0)
  })

  test('anything else is one line naming the variable', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ METRICS_PORT: 'no' }, /^METRICS_PORT must be an integer from 0 to 65535, or off/],
      [{ METRICS_PORT: '65536' }, /^METRICS_PORT must be an integer/],
      [{ METRICS_PORT: '-1' }, /^METRICS_PORT must be an integer/],
      [{ PORT: '9000', METRICS_PORT: '9000' }, /^METRICS_PORT must differ from PORT/],
      [{ PORT: '9464' }, /^METRICS_PORT must differ from PORT/],
      [{ METRICS_HOST: 'bad host!' }, /^METRICS_HOST must be an IP address/],
      [{ METRICS_HOST: 'bad host!', METRICS_PORT: 'off' }, /^METRICS_HOST must be an IP/],
    ]
    assertOneLineErrors(cases)
  })
})

// REDIS_URL and PETSTORE_REDIS_PREFIX (D9, D12): validated at start, one clear line.

describe('REDIS_URL', () => {
  test('unset or empty keeps rate-limit counters in memory', () => {
    assert.equal(loadConfig({}).redis, undefined)
    assert.equal(loadConfig({ REDIS_URL: '  ' }).redis, undefined)
  })

  test('redis:// and rediss:// (TLS), with credentials and a database number', () => {
    for (const url of [
      'redis://127.0.0.1:6379',
      'redis://cache.internal',
      'redis://:secret@cache.internal:6380/2',
      'rediss://app:secret@cache.example.com:6380',
    ]) {
      assert.deepEqual(loadConfig({ REDIS_URL: url }).redis, { url, prefix: 'petstore:' })
    }
  })

  test('PETSTORE_REDIS_PREFIX names the keys; it must be visible ASCII without spaces', () => {
    const config = loadConfig({ REDIS_URL: 'redis://cache', PETSTORE_REDIS_PREFIX: 'shop-eu:' })
    assert.equal(config.redis?.prefix, 'shop-eu:')
    for (const bad of ['a b', 'é:', 'x'.repeat(101)]) {
      assert.throws(
        () => loadConfig({ REDIS_URL: 'redis://cache', PETSTORE_REDIS_PREFIX: bad }),
        /PETSTORE_REDIS_PREFIX must be 1 to 100 visible ASCII characters/,
      )
    }
  })

  test('anything else is one clear line that does not repeat the password', () => {
    for (const bad of [
      'http://:secret@cache:6379',
      'redis://:secret@:6379',
      'redis://:secret@cache:99999',
      'redis://:secret@cache/zero',
      'cache:6379',
      'secret',
    ]) {
      assert.throws(
        () => loadConfig({ REDIS_URL: bad }),
        (err: Error) =>
          /^REDIS_URL must be redis:\/\/\[user:password@\]host\[:port\]\[\/db\], or rediss:\/\//.test(
            err.message,
          ) &&
          !err.message.includes('secret') &&
          !err.message.includes('\n'),
        bad,
      )
    }
  })
})

// PROBE_PORT and PROBE_HOST (D20): probes on a listener of their own, off unless asked.

describe('PROBE_PORT and PROBE_HOST', () => {
  test('off by default; a port on the API host; PROBE_HOST is taken as given', () => {
    assert.equal(loadConfig({}).probes, undefined)
    assert.deepEqual(loadConfig({ PROBE_PORT: ' 8081 ' }).probes, { port: 8081, host: '127.0.0.1' })
    assert.deepEqual(loadConfig({ HOST: '0.0.0.0', PROBE_PORT: '8081' }).probes, {
      port: 8081,
      host: '0.0.0.0',
    })
    assert.deepEqual(loadConfig({ PROBE_PORT: '8081', PROBE_HOST: '10.0.0.5' }).probes, {
      port: 8081,
      host: '10.0.0.5',
    })
    assert.equal(loadConfig({ PROBE_PORT: 'OFF' }).probes, undefined)
    assert.equal(loadConfig({ PORT: '0', METRICS_PORT: '0', PROBE_PORT: '0' }).probes?.port, 0)
  })

  test('anything else is one line naming the variable', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ PROBE_PORT: 'no' }, /^PROBE_PORT must be an integer from 0 to 65535, or off/],
      [{ PROBE_PORT: '65536' }, /^PROBE_PORT must be an integer/],
      [{ PROBE_PORT: 'tcp://10.0.0.7:80' }, /Kubernetes sets this for a Service named probe/],
      [{ PORT: '9000', PROBE_PORT: '9000' }, /^PROBE_PORT must differ from PORT/],
      [{ PROBE_PORT: '9464' }, /^PROBE_PORT must differ from METRICS_PORT/],
      [{ PROBE_HOST: 'bad host!' }, /^PROBE_HOST must be an IP address/],
    ]
    assertOneLineErrors(cases)
  })
})

describe('tracing (D23): the OpenTelemetry variables', () => {
  const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }

  test('off without an endpoint, or with OTEL_SDK_DISABLED=true', () => {
    assert.equal(loadConfig({}).tracing, undefined)
    assert.equal(loadConfig({ ...ENDPOINT, OTEL_SDK_DISABLED: 'true' }).tracing, undefined)
    assert.equal(loadConfig({ ...ENDPOINT, OTEL_SDK_DISABLED: 'TRUE' }).tracing, undefined)
  })

  test('on with an endpoint: the traces path appended, the defaults', () => {
    assert.deepEqual(loadConfig(ENDPOINT).tracing, {
      endpoint: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      sampler: 'parentbased_traceidratio',
      samplerRatio: 0.1,
      scheduleDelayMs: 5000,
    })
    assert.equal(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://c.example/otlp/' }).tracing?.endpoint,
      'https://c.example/otlp/v1/traces',
    )
    // The traces variable is taken as given, and wins over the general one.
    assert.equal(
      loadConfig({ ...ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:4318/x' }).tracing
        ?.endpoint,
      'http://t:4318/x',
    )
  })

  test('protocol, sampler and its ratio as the specification names them', () => {
    const tracing = loadConfig({
      ...ENDPOINT,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_TRACES_SAMPLER: 'traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
      OTEL_BSP_SCHEDULE_DELAY: '1000',
    }).tracing
    assert.equal(tracing?.protocol, 'http/json')
    assert.equal(tracing?.sampler, 'traceidratio')
    assert.equal(tracing?.samplerRatio, 0.25)
    assert.equal(tracing?.scheduleDelayMs, 1000)
    assert.equal(loadConfig({ ...ENDPOINT, OTEL_TRACES_SAMPLER_ARG: '1' }).tracing?.samplerRatio, 1)
  })

  test('anything else is one line naming the variable, endpoint set or not', () => {
    assertOneLineErrors([
      [
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' },
        /^OTEL_EXPORTER_OTLP_ENDPOINT must be an http/,
      ],
      [
        { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://c' },
        /^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be/,
      ],
      [
        // Issue 46: the value is never quoted back, credentials and all.
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://user:secret@c:4317/?api-key=token' },
        /^OTEL_EXPORTER_OTLP_ENDPOINT must be .* \(got a URL of scheme grpc:\)$/,
      ],
      [
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'http//user:secret@c' },
        /^OTEL_EXPORTER_OTLP_ENDPOINT must be .* \(got not a URL\)$/,
      ],
      [
        { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
        /grpc is not supported: use http\/protobuf or http\/json/,
      ],
      [
        { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'json' },
        /^OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be one of/,
      ],
      [{ OTEL_TRACES_SAMPLER: 'jaeger_remote' }, /^OTEL_TRACES_SAMPLER must be one of always_on/],
      [{ OTEL_TRACES_SAMPLER_ARG: '1.5' }, /^OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1/],
      [{ OTEL_TRACES_SAMPLER_ARG: 'half' }, /^OTEL_TRACES_SAMPLER_ARG must be a ratio/],
      [{ OTEL_SDK_DISABLED: 'yes' }, /^OTEL_SDK_DISABLED must be true or false/],
      [
        { OTEL_BSP_SCHEDULE_DELAY: '-1' },
        /^OTEL_BSP_SCHEDULE_DELAY must be an integer from 0 to 60000/,
      ],
    ])
  })
})

/** Each environment fails loadConfig with one line matching its pattern. */
function assertOneLineErrors(cases: [Record<string, string>, RegExp][]): void {
  for (const [env, message] of cases) {
    assert.throws(
      () => loadConfig(env),
      (err: unknown) =>
        err instanceof ConfigError && message.test(err.message) && !err.message.includes('\n'),
      JSON.stringify(env),
    )
  }
}

describe('PETSTORE_STAGING_FAULTS (D29)', () => {
  const staging = (faults: string) =>
    loadConfig({ PETSTORE_ENV: 'staging', PETSTORE_STAGING_FAULTS: faults }).stagingFaults

  test('off by default; statuses with their rates, and a delay, in staging', () => {
    assert.equal(loadConfig({ PETSTORE_ENV: 'staging' }).stagingFaults, undefined)
    assert.deepEqual(staging('503:0.05, 429:0.02,delay:200ms:0.1'), {
      answers: [
        { status: 503, rate: 0.05 },
        { status: 429, rate: 0.02 },
      ],
      delay: { ms: 200, rate: 0.1 },
    })
    assert.deepEqual(staging('500:1'), { answers: [{ status: 500, rate: 1 }], delay: undefined })
  })

  test('refused at start in production, in one line naming PETSTORE_ENV', () => {
    assert.throws(
      () => loadConfig({ PETSTORE_STAGING_FAULTS: '503:0.05' }),
      /^ConfigError: PETSTORE_STAGING_FAULTS is honoured only with PETSTORE_ENV=staging, and this is production: unset it/,
    )
    assert.equal(loadConfig({ PETSTORE_STAGING_FAULTS: 'off' }).stagingFaults, undefined)
  })

  test('anything else stops the start, saying what is allowed', () => {
    const cases: [string, RegExp][] = [
      [
        '404:0.1',
        /"404:0\.1" is not understood; it must be a comma-separated list of <status>:<rate> \(status 429, 500, 503\)/,
      ],
      ['503:1.5', /"503:1\.5": a rate is a number from 0 to 1/],
      ['503:5%', /a rate is a number from 0 to 1/],
      ['503:0.6,429:0.6', /the statuses' rates add up to 1\.2, more than 1/],
      ['503:0.1,503:0.2', /503 is given twice/],
      ['delay:0ms:0.1', /a delay is whole milliseconds from 1 to 10000/],
      ['delay:200:0.1', /a delay is whole milliseconds/],
      ['delay:20000ms:0.1', /a delay is whole milliseconds/],
      ['delay:1ms:0.1,delay:2ms:0.1', /delay is given twice/],
    ]
    for (const [raw, message] of cases) {
      assert.throws(
        () => staging(raw),
        (err: Error) => {
          assert.match(err.message, /^PETSTORE_STAGING_FAULTS: /)
          assert.match(err.message, message)
          return true
        },
        raw,
      )
    }
  })
})

describe('unknown variables (D9)', () => {
  test('every variable loadConfig reads is known, so none is ever called unknown', () => {
    const unknown = variablesRead().filter((name) => !KNOWN_VARIABLES.has(name))
    assert.deepEqual(unknown, [])
  })

  test('names each unread variable of PETSTORE_, DATABASE_ and OTEL_, with the nearest known name', () => {
    const names = (env: Record<string, string>) =>
      loadConfig(env).unknownSettings.map(({ name, suggestion }) => [name, suggestion])
    assert.deepEqual(
      names({
        PETSTORE_RATELIMIT: '5',
        DATABASE_POOLSIZE: '5',
        PETSTORE_PROBE_PORT: '9000',
        PETSTORE_LIVENES_STALL_MS: '900',
        OTEL_EXPORTER_OTLP_ENDPIONT: 'http://collector:4318',
        OTEL_TRACES_EXPORTER: 'otlp',
        PETSTORE_WIDGETS: 'on',
      }),
      [
        ['DATABASE_POOLSIZE', 'DATABASE_POOL_SIZE'],
        ['OTEL_EXPORTER_OTLP_ENDPIONT', 'OTEL_EXPORTER_OTLP_ENDPOINT'],
        ['OTEL_TRACES_EXPORTER', undefined],
        ['PETSTORE_LIVENES_STALL_MS', 'PETSTORE_LIVENESS_STALL_MS'],
        ['PETSTORE_PROBE_PORT', 'PROBE_PORT'],
        ['PETSTORE_RATELIMIT', 'PETSTORE_RATE_LIMIT'],
        ['PETSTORE_WIDGETS', undefined],
      ],
    )
    // Outside the namespaces only the names other tools use for ours (DB_URL), never HOME.
    assert.deepEqual(names({ DB_URL: 'x', LOGLEVEL: 'debug', HOME: '/root', HOSTNAME: 'vm' }), [
      ['DB_URL', 'DATABASE_URL'],
      ['LOGLEVEL', 'LOG_LEVEL'],
    ])
    // Read elsewhere: the CLI's client, the OTLP exporter's own, this repository's test switches.
    assert.deepEqual(
      names({
        PETSTORE_URL: 'http://127.0.0.1:8080/v1',
        PETSTORE_API_KEY: 'k',
        OTEL_EXPORTER_OTLP_HEADERS: 'a=b',
        OTEL_RESOURCE_ATTRIBUTES: 'a=b',
        PETSTORE_TEST_POSTGRES_URL: 'postgres://x',
        PETSTORE_REQUIRE_POSTGRES: '1',
      }),
      [],
    )
  })
})
