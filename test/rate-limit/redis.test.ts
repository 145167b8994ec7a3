// D12 across instances: the Redis counter itself, a limit that holds across two instances
// (apps with connections of their own to Redis, on one clock the test moves), and the limiter
// failing open while Redis is gone or hung, then applying again by itself when it answers.
// fail-open.test.ts starts a real `petstore serve` with REDIS_URL.
//
// Needs Redis at 127.0.0.1:6379 (PETSTORE_TEST_REDIS_URL for another). Without it this file is
// one skipped line, unless PETSTORE_REQUIRE_REDIS=1 makes that a failure. Every suite writes
// under its own key prefix and deletes it afterwards, so runs never count each other's requests.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Redis } from 'ioredis'
import { RedisWindowCounter } from '../../src/rate-limit/redis.ts'
import { type CuttableProxy, startCuttableProxy } from '../helpers/cuttable-proxy.ts'
import { type LogLine, memoryLog, WARN } from '../helpers/logs.ts'
import {
  adminClient,
  deleteKeys,
  describeWithRedis,
  REDIS_URL,
  redisAddress,
  uniquePrefix,
} from '../helpers/redis.ts'
import {
  errorOf,
  ManualClock,
  openTestStore,
  startServer,
  type TestServer,
  type TestStore,
} from '../helpers/server.ts'

const MINUTE = 60_000

/** Parses `"default";r=<remaining>;t=<seconds>`. */
function parseRateLimit(value: string | null): { r: number; t: number } {
  const match = /^"default";r=(\d+);t=(\d+)$/.exec(value ?? '')
  assert.ok(match, `RateLimit is ${JSON.stringify(value)}`)
  return { r: Number(match[1]), t: Number(match[2]) }
}

/**
 * Requests until a response states the budget again: the client has reconnected to Redis
 * (its reconnect delays grow to 2 s), and the counter answers.
 */
async function untilCounted(server: TestServer): Promise<Response> {
  for (;;) {
    const response = await server.request('/v1/pets')
    if (response.headers.has('ratelimit')) return response
    await response.body?.cancel()
    await sleep(100)
  }
}

/** The limiter's log lines about the counter: the outage, and the recovery. */
function rateLimitLogs(lines: LogLine[]) {
  const about = lines.filter((line) => /rate limit/.test(line.msg ?? ''))
  return {
    warnings: about.filter((line) => line.level === WARN),
    recoveries: about.filter((line) => /reachable again/.test(line.msg ?? '')),
  }
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
      // Every hit here must count, however busy the machine: a generous command timeout.
      const options = { url: REDIS_URL, prefix: keyPrefix, commandTimeoutMs: 5000 }
      counter = new RedisWindowCounter(options)
      other = new RedisWindowCounter(options)
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

      // A one-second window's count expires within that second (Redis removes it then).
      await counter.hit('key_short', 9, 1)
      const pttl = await admin.pttl(counter.keyFor('key_short', 9, 1))
      assert.ok(pttl > 0 && pttl <= 1000, `PTTL ${pttl}`)
      // Only the first hit of a window sets the expiry: later ones do not push it back.
      await admin.pexpire(counter.keyFor('key_short', 9, 1), 50_000)
      await counter.hit('key_short', 9, 1)
      assert.ok((await admin.pttl(counter.keyFor('key_short', 9, 1))) > 1000)
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
      const elsewhere = new RedisWindowCounter({
        url: REDIS_URL,
        prefix: prefix(),
        commandTimeoutMs: 5000,
      })
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
        // Redis never answers while stalled: the rejection is the command timeout's.
        await assert.rejects(slow.hit('hang', 13, 60), /Command timed out/)
      } finally {
        await slow.close()
        await proxy.close()
      }
    })
  })

  describe('one limit across two instances', () => {
    const QUOTA = 5
    const KEY = `redis-test-${randomBytes(16).toString('hex')}`
    // The instances share one clock the test moves (D12's windows follow the app's clock), so
    // the requests of a test are in one window however slow the machine, and the next window
    // comes without waiting for it.
    const clock = new ManualClock(Date.UTC(2026, 10, 23, 12, 0, 20))
    let keyPrefix: string
    let database: TestStore
    const counters: RedisWindowCounter[] = []
    const servers: TestServer[] = []

    before(async () => {
      keyPrefix = prefix()
      database = await openTestStore()
      for (let i = 0; i < 2; i++) {
        // Each instance has its own connection to Redis, as separate processes do. A generous
        // command timeout: here every hit must count, however busy the machine.
        const counter = new RedisWindowCounter({
          url: REDIS_URL,
          prefix: keyPrefix,
          commandTimeoutMs: 5000,
        })
        assert.equal(await counter.whenReady(2000), true)
        counters.push(counter)
        servers.push(
          await startServer({
            store: database.store,
            rateLimit: QUOTA,
            rateLimitCounter: counter,
            clock,
            bootstrapKeys: [KEY],
          }),
        )
      }
    })
    after(async () => {
      for (const server of servers) await server.close()
      for (const counter of counters) await counter.close()
      await database?.close()
    })

    /** Requests alternating between the instances, with the key both accept. */
    async function alternate(count: number) {
      const results: { instance: number; response: Response }[] = []
      for (let i = 0; i < count; i++) {
        const instance = i % 2
        const server = servers[instance]
        assert.ok(server)
        const response = await fetch(`${server.url}/v1/pets`, {
          headers: { authorization: `Bearer ${KEY}` },
        })
        results.push({ instance, response })
      }
      return results
    }

    test('exactly N requests a window succeed, whichever instance answers', async () => {
      const results = await alternate(2 * QUOTA + 2)
      const ok = results.filter(({ response }) => response.status === 200)
      const limited = results.filter(({ response }) => response.status === 429)
      // The first N in order, with one budget counting down across both instances.
      assert.deepEqual(
        results.map(({ response }) => response.status),
        [...Array(QUOTA).fill(200), ...Array(QUOTA + 2).fill(429)],
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
        // 20 s into the minute: 40 s until the next window, on both instances.
        assert.equal(response.headers.get('retry-after'), '40')
        assert.deepEqual(parseRateLimit(response.headers.get('ratelimit')), { r: 0, t: 40 })
        assert.equal((await errorOf(response)).code, 'rate_limited')
      }
    })

    test('the count is one key in Redis, under the configured prefix, expiring', async () => {
      const keys = await admin.keys(`${keyPrefix}*`)
      assert.equal(keys.length, 1, keys.join(', '))
      const [name] = keys
      const window = Math.floor(clock.now() / MINUTE)
      assert.match(name ?? '', new RegExp(`^${keyPrefix}ratelimit:60:${window}:env_[0-9a-f]{12}$`))
      assert.equal(await admin.get(name ?? ''), String(2 * QUOTA + 2))
      const ttl = await admin.ttl(name ?? '')
      assert.ok(ttl > 0 && ttl <= 60, `TTL ${ttl}`)
    })

    test('the next window restores the budget on both instances, in a key of its own', async () => {
      clock.advance(40_000)
      const results = await alternate(QUOTA + 1)
      assert.deepEqual(
        results.map(({ response }) => response.status),
        [...Array(QUOTA).fill(200), 429],
      )
      for (const { response } of results) await response.body?.cancel()
      assert.equal((await admin.keys(`${keyPrefix}*`)).length, 2)
    })
  })

  describe('Redis going away and coming back', () => {
    const QUOTA = 3
    const clock = new ManualClock(Date.UTC(2026, 10, 23, 12, 0, 0))
    const running: { proxy: CuttableProxy; counter: RedisWindowCounter; server: TestServer }[] = []

    /**
     * An instance whose path to Redis runs through a proxy the test controls. Its hits time out
     * after `commandTimeoutMs` (the service's 200 ms unless given).
     */
    async function instanceBehindProxy(commandTimeoutMs?: number) {
      const proxy = await startCuttableProxy(redisAddress)
      const counter = new RedisWindowCounter({
        url: `redis://127.0.0.1:${proxy.port}`,
        prefix: prefix(),
        ...(commandTimeoutMs === undefined ? {} : { commandTimeoutMs }),
      })
      assert.equal(await counter.whenReady(2000), true)
      const log = memoryLog()
      const server = await startServer({
        rateLimit: QUOTA,
        rateLimitCounter: counter,
        clock,
        logger: { level: 'info', stream: log.stream },
      })
      running.push({ proxy, counter, server })
      return { proxy, server, log }
    }

    after(async () => {
      for (const { proxy, counter, server } of running) {
        await server.close()
        await counter.close()
        await proxy.close()
      }
    })

    test('unreachable: requests go through; back: the limit applies again, logged once each', async () => {
      // A cut connection fails hits at once; the timeout only keeps a busy machine's slow hit
      // from being taken for an outage.
      const { proxy, server, log } = await instanceBehindProxy(5000)

      for (let i = 0; i < QUOTA; i++) assert.equal((await server.request('/v1/pets')).status, 200)
      assert.equal((await server.request('/v1/pets')).status, 429)

      await proxy.cut()
      for (let i = 0; i < 8; i++) {
        const response = await server.request('/v1/pets')
        assert.equal(response.status, 200, 'fails open while Redis is unreachable')
        assert.equal(response.headers.get('ratelimit'), null)
        assert.equal(response.headers.get('ratelimit-policy'), `"default";q=${QUOTA};w=60`)
        await response.body?.cancel()
      }

      await proxy.restore()
      const counted = await untilCounted(server)
      assert.equal(counted.status, 429, 'the budget used before the outage still counts')
      assert.equal(parseRateLimit(counted.headers.get('ratelimit')).r, 0)
      await counted.body?.cancel()

      const { warnings, recoveries } = rateLimitLogs(log.lines())
      assert.equal(warnings.length, 1, JSON.stringify(warnings))
      assert.match(warnings[0]?.msg ?? '', /unreachable/)
      assert.equal(recoveries.length, 1, JSON.stringify(recoveries))
      assert.ok(Number(recoveries[0]?.requestsLetThrough) >= 8)
    })

    test('hung: each request is answered once the hit times out, without a limit', async () => {
      const { proxy, server, log } = await instanceBehindProxy(300)

      const before = await server.request('/v1/pets')
      assert.ok(before.headers.has('ratelimit'))
      await before.body?.cancel()

      // Redis never answers while stalled: a response at all shows the hit gave up.
      proxy.stall()
      for (let i = 0; i < 3; i++) {
        const response = await server.request('/v1/pets')
        assert.equal(response.status, 200)
        assert.equal(response.headers.get('ratelimit'), null)
        await response.body?.cancel()
      }
      proxy.unstall()
      const counted = await untilCounted(server)
      assert.ok(counted.headers.has('ratelimit'), 'the limit never applied again')
      await counted.body?.cancel()

      const { warnings, recoveries } = rateLimitLogs(log.lines())
      assert.equal(warnings.length, 1, JSON.stringify(warnings))
      assert.match(JSON.stringify(warnings[0]?.err), /timed out/)
      assert.equal(recoveries.length, 1, JSON.stringify(recoveries))
    })
  })
})
