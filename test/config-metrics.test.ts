// METRICS_PORT and METRICS_HOST (D17): a listener of its own, checked at start with one line.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { ConfigError, loadConfig } from '../src/config.ts'

describe('METRICS_PORT and METRICS_HOST', () => {
  test('default to port 9464 on the API host; off disables; METRICS_HOST is taken as given', () => {
    assert.deepEqual(loadConfig({}).metrics, { port: 9464, host: '127.0.0.1' })
    assert.deepEqual(loadConfig({ HOST: '0.0.0.0' }).metrics, { port: 9464, host: '0.0.0.0' })
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
    for (const [env, message] of cases) {
      assert.throws(
        () => loadConfig(env),
        (err: unknown) =>
          err instanceof ConfigError && message.test(err.message) && !err.message.includes('\n'),
        JSON.stringify(env),
      )
    }
  })
})
