// REDIS_URL and PETSTORE_REDIS_PREFIX (D9, D12): validated at start, one clear line.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { loadConfig } from '../src/config.ts'

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
