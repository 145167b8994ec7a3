// D12 across instances: the Redis counter itself, a limit that holds across two `petstore
// serve` processes, and the limiter failing open while Redis is gone or hung, then applying
// again by itself when it answers.
//
// Needs Redis at 127.0.0.1:6379 (PETSTORE_TEST_REDIS_URL for another). Without it this file is
// one skipped line, unless PETSTORE_REQUIRE_REDIS=1 makes that a failure. Every suite writes
// under its own key prefix and deletes it afterwards, so runs never count each other's requests.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Redis } from 'ioredis'
import { RedisWindowCounter } from '../../src/rate-limit/redis.ts'
import { type CuttableProxy, startCuttableProxy } from '../helpers/cuttable-proxy.ts'
import { logLines, WARN } from '../helpers/logs.ts'
import { type ServiceProcess, startService } from '../helpers/process.ts'
import {
  adminClient,
  deleteKeys,
  describeWithRedis,
  REDIS_URL,
  redisAddress,
  uniquePrefix,
} from '../helpers/redis.ts'
import { errorOf, tempDir } from '../helpers/server.ts'

const MINUTE = 60_000

function minute(): number {
  return Math.floor(Date.now() / MINUTE)
}

/**
 * The limit counts in one-minute windows of the wall clock. A test that needs its requests in
 * one window waits, when fewer than `needMs` remain in this one, for the next to begin.
 */
async function roomInWindow(needMs: number): Promise<void> {
  const left = MINUTE - (Date.now() % MINUTE)
  if (left < needMs) await sleep(left + 50)
}

/** Parses `"default";r=<remaining>;t=<seconds>`. */
function parseRateLimit(value: string | null): { r: number; t: number } {
  const match = /^"default";r=(\d+);t=(\d+)$/.exec(value ?? '')
  assert.ok(match, `RateLimit is ${JSON.stringify(value)}`)
  return { r: Number(match[1]), t: Number(match[2]) }
}

function apiKey(): string {
  return `redis-test-${randomBytes(16).toString('hex')}`
}

async function get(service: ServiceProcess, key: string): Promise<Response> {
  return fetch(`${service.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
}

/** A GET that must be served within a second, whatever state Redis is in. */
async function promptGet(service: ServiceProcess, key: string): Promise<Response> {
  const started = performance.now()
  const response = await get(service, key)
  const elapsed = performance.now() - started
  assert.ok(elapsed < 1000, `a request took ${Math.round(elapsed)} ms`)
  return response
}

/** Requests until a response states the budget again (the counter answers), at most `ms`. */
async function untilCounted(service: ServiceProcess, key: string, ms: number): Promise<Response> {
  const deadline = Date.now() + ms
  for (;;) {
    const response = await promptGet(service, key)
    if (response.headers.has('ratelimit') || Date.now() > deadline) return response
    await response.body?.cancel()
    await sleep(100)
  }
}

/**
 * The limiter's log lines about the counter, once the outage and the recovery have both been
 * logged (the lines reach us through a pipe, possibly after the response that caused them).
 */
async function rateLimitLogs(service: ServiceProcess) {
  const read = () => {
    const lines = logLines(service.stdout()).filter((line) => /rate limit/.test(line.msg ?? ''))
    return {
      warnings: lines.filter((line) => line.level === WARN),
      recoveries: lines.filter((line) => /reachable again/.test(line.msg ?? '')),
    }
  }
  for (let waited = 0; waited < 2000; waited += 50) {
    const { warnings, recoveries } = read()
    if (warnings.length > 0 && recoveries.length > 0) break
    await sleep(50)
  }
  return read()
}

await describeWithRedis('rate limits shared through Redis', () => {
  let admin: Redis
  const prefixes: string[] = []

  /** A fresh prefix, deleted after the file's tests. */
  function prefix(): string {
    const value = uniquePrefix()
    prefixes.push(value)
    return value
  }

  before(async () => {
    admin = adminClient()
    await admin.connect()
  })
  after(async () => {
    for (const value of prefixes) await deleteKeys(admin, value)
    await admin.quit()
  })

  describe('the Redis window counter', () => {
    let counter: RedisWindowCounter
    let other: RedisWindowCounter
    let keyPrefix: string

    before(async () => {
      keyPrefix = prefix()
      counter = new RedisWindowCounter({ url: REDIS_URL, prefix: keyPrefix })
      other = new RedisWindowCounter({ url: REDIS_URL, prefix: keyPrefix })
      assert.equal(await counter.whenReady(2000), true)
      assert.equal(await other.whenReady(2000), true)
    })
    after(async () => {
      await counter.close()
      await other.close()
    })

    test('counts each key in each window separately', async () => {
      assert.deepEqual(
        [
          await counter.hit('a', 7, 60),
          await counter.hit('a', 7, 60),
          await counter.hit('a', 7, 60),
        ],
        [1, 2, 3],
      )
      assert.equal(await counter.hit('b', 7, 60), 1)
      assert.equal(await counter.hit('a', 8, 60), 1, 'a new window starts from zero')
      assert.equal(await counter.hit('a', 7, 30), 1, 'another window length is another count')
    })

    test('the key names the prefix, window and key id, and expires with the window', async () => {
      await counter.hit('key_expiry', 9, 60)
      const key = counter.keyFor('key_expiry', 9, 60)
      assert.equal(key, `${keyPrefix}ratelimit:60:9:key_expiry`)
      assert.equal(await admin.get(key), '1')
      const ttl = await admin.ttl(key)
      assert.ok(ttl > 0 && ttl <= 60, `TTL ${ttl}`)

      await counter.hit('key_short', 9, 1)
      assert.equal(await admin.exists(counter.keyFor('key_short', 9, 1)), 1)
      await sleep(1200)
      assert.equal(await admin.exists(counter.keyFor('key_short', 9, 1)), 0)
    })

    test('hits from two connections at once are each counted once', async () => {
      const counts = await Promise.all(
        Array.from({ length: 200 }, (_, i) => (i % 2 ? counter : other).hit('busy', 11, 60)),
      )
      assert.deepEqual(
        counts.sort((x, y) => x - y),
        Array.from({ length: 200 }, (_, i) => i + 1),
      )
    })

    test('another prefix is another deployment: counts do not mix', async () => {
      const elsewhere = new RedisWindowCounter({ url: REDIS_URL, prefix: prefix() })
      try {
        assert.equal(await elsewhere.whenReady(2000), true)
        await counter.hit('shared-id', 12, 60)
        await counter.hit('shared-id', 12, 60)
        assert.equal(await elsewhere.hit('shared-id', 12, 60), 1)
      } finally {
        await elsewhere.close()
      }
    })

    test('a hung Redis fails a hit within the command timeout', async () => {
      const proxy = await startCuttableProxy(redisAddress)
      const slow = new RedisWindowCounter({
        url: `redis://127.0.0.1:${proxy.port}`,
        prefix: keyPrefix,
        commandTimeoutMs: 150,
      })
      try {
        assert.equal(await slow.whenReady(2000), true)
        assert.equal(await slow.hit('hang', 13, 60), 1)
        proxy.stall()
        const started = performance.now()
        await assert.rejects(slow.hit('hang', 13, 60), /timed out/)
        assert.ok(performance.now() - started < 1000)
      } finally {
        await slow.close()
        await proxy.close()
      }
    })
  })

  describe('one limit across two instances', () => {
    const QUOTA = 5
    const key = apiKey()
    let dir: Awaited<ReturnType<typeof tempDir>>
    let keyPrefix: string
    const services: ServiceProcess[] = []

    before(async () => {
      dir = await tempDir()
      keyPrefix = prefix()
      const env = {
        DATABASE_URL: `sqlite:${join(dir.path, 'shared.db')}`,
        PETSTORE_API_KEYS: key,
        PETSTORE_RATE_LIMIT: String(QUOTA),
        REDIS_URL,
        PETSTORE_REDIS_PREFIX: keyPrefix,
      }
      // One after the other: the first applies the migrations to the shared file.
      services.push(await startService(env))
      services.push(await startService(env))
    })
    after(async () => {
      for (const service of services) await service.stop()
      await dir?.remove()
    })

    test('exactly N requests a minute succeed, whichever instance answers', async () => {
      await roomInWindow(15_000)
      const window = minute()
      const results: { instance: number; response: Response }[] = []
      for (let i = 0; i < 2 * QUOTA + 2; i++) {
        const instance = i % 2
        const service = services[instance]
        assert.ok(service)
        results.push({ instance, response: await get(service, key) })
      }
      assert.equal(minute(), window, 'the requests crossed a window boundary')

      const ok = results.filter(({ response }) => response.status === 200)
      const limited = results.filter(({ response }) => response.status === 429)
      assert.equal(ok.length, QUOTA)
      assert.equal(limited.length, QUOTA + 2)
      // The first N in order, with one budget counting down across both instances.
      assert.deepEqual(
        results.slice(0, QUOTA).map(({ response }) => response.status),
        Array(QUOTA).fill(200),
      )
      assert.deepEqual(
        ok.map(({ response }) => parseRateLimit(response.headers.get('ratelimit')).r),
        [4, 3, 2, 1, 0],
      )
      assert.deepEqual(new Set(ok.map(({ instance }) => instance)), new Set([0, 1]))
      assert.deepEqual(new Set(limited.map(({ instance }) => instance)), new Set([0, 1]))

      for (const { response } of ok) {
        assert.equal(response.headers.get('ratelimit-policy'), `"default";q=${QUOTA};w=60`)
        assert.equal(response.headers.get('retry-after'), null)
        await response.body?.cancel()
      }
      for (const { response } of limited) {
        assert.equal(response.headers.get('ratelimit-policy'), `"default";q=${QUOTA};w=60`)
        const retryAfter = response.headers.get('retry-after') ?? ''
        assert.match(retryAfter, /^\d+$/)
        assert.ok(Number(retryAfter) >= 1 && Number(retryAfter) <= 60, retryAfter)
        const { r, t } = parseRateLimit(response.headers.get('ratelimit'))
        assert.equal(r, 0)
        assert.equal(t, Number(retryAfter))
        assert.equal((await errorOf(response)).code, 'rate_limited')
      }
    })

    test('the count is one key in Redis, under the configured prefix, expiring', async () => {
      const keys = await admin.keys(`${keyPrefix}*`)
      assert.equal(keys.length, 1, keys.join(', '))
      const [name] = keys
      assert.match(name ?? '', new RegExp(`^${keyPrefix}ratelimit:60:\\d+:env_[0-9a-f]{12}$`))
      assert.equal(await admin.get(name ?? ''), String(2 * QUOTA + 2))
      const ttl = await admin.ttl(name ?? '')
      assert.ok(ttl > 0 && ttl <= 60, `TTL ${ttl}`)
    })
  })

  describe('Redis going away and coming back', () => {
    const QUOTA = 3
    let dir: Awaited<ReturnType<typeof tempDir>>

    /** An instance whose path to Redis runs through a proxy the test controls. */
    async function instanceBehindProxy(key: string) {
      const proxy = await startCuttableProxy(redisAddress)
      const service = await startService({
        DATABASE_URL: `sqlite:${join(dir.path, `${randomBytes(4).toString('hex')}.db`)}`,
        PETSTORE_API_KEYS: key,
        PETSTORE_RATE_LIMIT: String(QUOTA),
        REDIS_URL: `redis://127.0.0.1:${proxy.port}`,
        PETSTORE_REDIS_PREFIX: prefix(),
      })
      return { proxy, service }
    }
    let running: { proxy: CuttableProxy; service: ServiceProcess }[] = []

    before(async () => {
      dir = await tempDir()
    })
    after(async () => {
      for (const { proxy, service } of running) {
        await service.stop()
        await proxy.close()
      }
      running = []
      await dir?.remove()
    })

    test('unreachable: requests go through; back: the limit applies again, logged once each', async () => {
      const key = apiKey()
      const { proxy, service } = await instanceBehindProxy(key)
      running.push({ proxy, service })
      await roomInWindow(30_000)
      const window = minute()

      for (let i = 0; i < QUOTA; i++) assert.equal((await get(service, key)).status, 200)
      assert.equal((await get(service, key)).status, 429)

      await proxy.cut()
      for (let i = 0; i < 8; i++) {
        const response = await promptGet(service, key)
        assert.equal(response.status, 200, 'fails open while Redis is unreachable')
        assert.equal(response.headers.get('ratelimit'), null)
        assert.equal(response.headers.get('ratelimit-policy'), `"default";q=${QUOTA};w=60`)
        await response.body?.cancel()
      }

      await proxy.restore()
      const counted = await untilCounted(service, key, 10_000)
      assert.equal(counted.status, 429, 'the budget used before the outage still counts')
      assert.equal(parseRateLimit(counted.headers.get('ratelimit')).r, 0)
      await counted.body?.cancel()
      assert.equal(minute(), window, 'the test crossed a window boundary')

      const { warnings, recoveries } = await rateLimitLogs(service)
      assert.equal(warnings.length, 1, JSON.stringify(warnings))
      assert.match(warnings[0]?.msg ?? '', /unreachable/)
      assert.equal(recoveries.length, 1, JSON.stringify(recoveries))
      assert.ok(Number(recoveries[0]?.requestsLetThrough) >= 8)
    })

    test('hung: each request waits at most the command timeout, then goes through', async () => {
      const key = apiKey()
      const { proxy, service } = await instanceBehindProxy(key)
      running.push({ proxy, service })

      const before = await get(service, key)
      assert.ok(before.headers.has('ratelimit'))
      await before.body?.cancel()

      proxy.stall()
      for (let i = 0; i < 6; i++) {
        const response = await promptGet(service, key)
        assert.equal(response.status, 200)
        assert.equal(response.headers.get('ratelimit'), null)
        await response.body?.cancel()
      }
      proxy.unstall()
      const counted = await untilCounted(service, key, 10_000)
      assert.ok(counted.headers.has('ratelimit'), 'the limit never applied again')
      await counted.body?.cancel()

      const { warnings, recoveries } = await rateLimitLogs(service)
      assert.equal(warnings.length, 1, JSON.stringify(warnings))
      assert.equal(recoveries.length, 1, JSON.stringify(recoveries))
    })
  })
})
