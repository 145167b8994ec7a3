// Shared Redis setup for tests: whether a server is reachable, a key prefix per run (so runs
// and files never count each other's requests), and cleanup of what a run wrote.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { connect, createServer } from 'node:net'
import { describe, test } from 'node:test'
import { Redis } from 'ioredis'

/** The server the tests use. Override for another server. */
export const REDIS_URL = process.env.PETSTORE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'

/** CI sets this: an unreachable Redis then fails the run instead of skipping its tests. */
export const REDIS_REQUIRED = process.env.PETSTORE_REQUIRE_REDIS === '1'

const { hostname: HOST, port: PORT_TEXT } = new URL(REDIS_URL)
const PORT = Number(PORT_TEXT || '6379')

/** Where REDIS_URL points, e.g. for a proxy in front of it. */
export const redisAddress = { host: HOST, port: PORT }

/** The one line printed where Redis is absent. */
export function unreachableLine(): string {
  return `Redis is not reachable at ${HOST}:${PORT}; the Redis tests are skipped`
}

/** PING over a plain socket: no client library, so no reconnect loop to tear down. */
export function redisReachable(timeoutMs = 1500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: HOST, port: PORT })
    const done = (up: boolean) => {
      socket.destroy()
      resolve(up)
    }
    socket.setTimeout(timeoutMs, () => done(false))
    socket.once('error', () => done(false))
    socket.once('connect', () => socket.write('PING\r\n'))
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')))
  })
}

/**
 * Registers `suite` where Redis is reachable. Elsewhere it is one skipped line saying so, or,
 * with PETSTORE_REQUIRE_REDIS=1 (CI), one failing test, so that a missing server fails the run.
 */
export async function describeWithRedis(name: string, suite: () => void): Promise<void> {
  if (await redisReachable()) {
    describe(name, suite)
  } else if (REDIS_REQUIRED) {
    test(name, () => {
      assert.fail(`${unreachableLine()}, but PETSTORE_REQUIRE_REDIS=1 requires them`)
    })
  } else {
    describe(name, { skip: unreachableLine() }, suite)
  }
}

/** A PETSTORE_REDIS_PREFIX no other run or test uses. */
export function uniquePrefix(): string {
  return `petstore-test:${randomBytes(6).toString('hex')}:`
}

/** A plain client for checking and cleaning up what the service wrote. */
export function adminClient(): Redis {
  return new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 })
}

/** Deletes every key under `prefix` (they would expire within two minutes anyway). */
export async function deleteKeys(client: Redis, prefix: string): Promise<void> {
  let cursor = '0'
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500)
    if (keys.length > 0) await client.del(...keys)
    cursor = next
  } while (cursor !== '0')
}

/** A local port where nothing listens (it was free a moment ago). */
export async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  return address.port
}
