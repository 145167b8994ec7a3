// HOST (D9): an IP literal or an RFC 1123 host name, checked at start with one clear line.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { ConfigError, loadConfig } from '../src/config.ts'

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
