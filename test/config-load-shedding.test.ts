// PETSTORE_MAX_EVENT_LOOP_DELAY_MS (D9, D16): the load-shedding threshold, validated at start.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ConfigError, loadConfig } from '../src/config.ts'

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
