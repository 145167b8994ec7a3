// D16's connection limits (D9: validated at start, one clear line on error).
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { ConfigError, loadConfig } from '../src/config.ts'

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
