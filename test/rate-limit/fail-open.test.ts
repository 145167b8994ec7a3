// D12 with REDIS_URL, when Redis is not there: the limiter fails open. Requests are served
// (no hang, no error), carry RateLimit-Policy but no RateLimit field (the remaining
// budget is unknown), and the outage is logged once, not once per request.
// Needs no Redis: REDIS_URL points at a port where nothing listens.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { RedisWindowCounter } from '../../src/rate-limit/redis.ts'
import { logLines, metricsUrlIn, WARN } from '../helpers/logs.ts'
import { type ServiceProcess, startService } from '../helpers/process.ts'
import { parseExposition, sampleValue } from '../helpers/prometheus.ts'
import { closedPort } from '../helpers/redis.ts'
import { tempDir } from '../helpers/server.ts'

const KEY = `fail-open-${randomBytes(16).toString('hex')}`

describe('rate limit with Redis unreachable (fail open)', () => {
  let dir: Awaited<ReturnType<typeof tempDir>>
  let service: ServiceProcess
  let redisUrl: string

  before(async () => {
    dir = await tempDir()
    redisUrl = `redis://:s3cret-password@127.0.0.1:${await closedPort()}`
    service = await startService({
      DATABASE_URL: `sqlite:${join(dir.path, 'petstore.db')}`,
      PETSTORE_API_KEYS: KEY,
      PETSTORE_RATE_LIMIT: '2',
      REDIS_URL: redisUrl,
      METRICS_PORT: '0',
    })
  })
  after(async () => {
    await service?.stop()
    await dir?.remove()
  })

  test('a hit fails at once instead of waiting for a connection', async () => {
    const counter = new RedisWindowCounter({ url: redisUrl, prefix: 'unused:' })
    try {
      // Refused before it is sent, not queued until a connection comes (nor timed out).
      await assert.rejects(counter.hit('key', 1, 60), /enableOfflineQueue options is false/)
    } finally {
      await counter.close()
    }
  })

  test('requests are served without a limit and without a RateLimit field', async () => {
    for (let i = 0; i < 12; i++) {
      const response = await fetch(`${service.url}/v1/pets`, {
        headers: { authorization: `Bearer ${KEY}` },
      })
      assert.equal(response.status, 200, `request ${i + 1} of 12 with a quota of 2`)
      assert.equal(response.headers.get('ratelimit-policy'), '"default";q=2;w=60')
      assert.equal(response.headers.get('ratelimit'), null)
      assert.equal(response.headers.get('retry-after'), null)
      await response.body?.cancel()
    }
  })

  test('metrics say that the limiter fails open, and count no 429 (D17)', async () => {
    const url = metricsUrlIn(service.stdout())
    assert.ok(url !== undefined, 'the metrics listener logged its URL')
    const families = parseExposition(await (await fetch(url)).text())
    assert.equal(sampleValue(families, 'petstore_rate_limit_fail_open'), 1)
    assert.equal(sampleValue(families, 'petstore_rate_limited_total'), 0)
  })

  test('the outage is logged once, as a warning, without the password', async () => {
    const lines = logLines(service.stdout())
    const warnings = lines.filter(
      (line) => line.level === WARN && /rate limit/.test(line.msg ?? ''),
    )
    assert.equal(warnings.length, 1, JSON.stringify(warnings))
    assert.match(warnings[0]?.msg ?? '', /unreachable.*fail open/)
    const startup = lines.find((line) => /counted in Redis/.test(line.msg ?? ''))
    assert.equal(startup?.reachable, false)
    assert.match(String(startup?.redis), /^redis:\/\/:\*\*\*@127\.0\.0\.1:\d+/)
    assert.ok(!service.stdout().includes('s3cret-password'), 'the Redis password was logged')
  })
})
