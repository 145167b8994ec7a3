// D3 in a fleet: two instances on one PostgreSQL database and one Redis, behind HAProxy with
// docs/fleet.md's configuration (`option forwardfor`), each trusting X-Forwarded-For from the
// balancer's address only. Failed authentications count per client address, shared through
// Redis; a forged X-Forwarded-For chooses nothing; a key made and revoked with the CLI holds on
// both instances within PETSTORE_KEY_CACHE_MS.
import assert from 'node:assert/strict'
import { request as httpRequest } from 'node:http'
import { after, before, describe, test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { generateApiKey } from '../../src/contract/api-key.ts'
import { freePort } from '../helpers/free-port.ts'
import { type HAProxy, haproxySkipReason, startHAProxy } from '../helpers/haproxy.ts'
import { createTestDatabase, postgresSkipReason, type TestDatabase } from '../helpers/postgres.ts'
import { runCli, type ServiceProcess, startService } from '../helpers/process.ts'
import {
  adminClient,
  deleteKeys,
  REDIS_REQUIRED,
  REDIS_URL,
  redisReachable,
  uniquePrefix,
  unreachableLine,
} from '../helpers/redis.ts'

const INSTANCES = 2
const LIMIT = 10
const KEY_CACHE_MS = 500
/** HAProxy connects to the instances from here, the only address they trust. */
const BALANCER = '127.0.0.1'

const skip =
  (await postgresSkipReason()) ??
  haproxySkipReason() ??
  // Where Redis is required (CI), its absence fails the test instead.
  ((await redisReachable()) || REDIS_REQUIRED ? undefined : unreachableLine())

/** GET `path` on `url` from a chosen local address; the status. */
function statusOf(
  url: string,
  options: { key: string; from: string; forwardedFor?: string },
): Promise<number> {
  const { hostname, port } = new URL(url)
  const headers: Record<string, string> = { authorization: `Bearer ${options.key}` }
  if (options.forwardedFor !== undefined) headers['x-forwarded-for'] = options.forwardedFor
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: hostname, port, path: '/v1/pets?limit=1', headers, localAddress: options.from },
      (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode ?? 0))
      },
    )
    req.on('error', reject)
    req.end()
  })
}

describe('failed authentications and the key cache across a fleet', { skip }, () => {
  let db: TestDatabase
  let balancer: HAProxy
  const services: ServiceProcess[] = []
  const prefix = uniquePrefix()
  const admin = adminClient()
  const cli = (...args: string[]) =>
    runCli(args, { DATABASE_URL: db.url, DATABASE_POOLER: db.pooler })

  /** A key made with `petstore keys create`, and its id. */
  async function createKey(name: string): Promise<{ key: string; id: string }> {
    const made = await cli('keys', 'create', '--name', name)
    assert.equal(made.code, 0, made.stderr)
    const id = /key_[A-Za-z0-9]{12}/.exec(made.stderr)?.[0]
    assert.ok(id !== undefined, made.stderr)
    return { key: made.stdout.trim(), id }
  }

  before(async () => {
    db = await createTestDatabase()
    const ports: number[] = []
    for (let i = 0; i < INSTANCES; i++) ports.push(await freePort())
    for (const port of ports) {
      services.push(
        await startService({
          DATABASE_URL: db.url,
          DATABASE_POOLER: db.pooler,
          REDIS_URL,
          PETSTORE_REDIS_PREFIX: prefix,
          PETSTORE_RATE_LIMIT: '0',
          PETSTORE_TRUSTED_PROXIES: BALANCER,
          PETSTORE_AUTH_FAILURE_LIMIT: String(LIMIT),
          PETSTORE_KEY_CACHE_MS: String(KEY_CACHE_MS),
          PORT: String(port),
        }),
      )
    }
    balancer = await startHAProxy(
      ports.map((port, i) => ({ name: `petstore${i + 1}`, address: `127.0.0.1:${port}` })),
    )
  })
  after(async () => {
    const codes = await Promise.all(services.map((s) => s.stop()))
    await balancer?.stop()
    await db?.drop()
    await deleteKeys(admin, prefix)
    await admin.quit()
    assert.deepEqual(codes, Array(INSTANCES).fill(0), 'every instance shut down cleanly')
  })

  test('a client behind HAProxy is counted by its own address, shared by both instances', async () => {
    const { key } = await createKey('behind-the-balancer')
    const attacker = '127.0.0.2'
    // Its key, seen valid by both instances before the failures (round robin).
    for (let i = 0; i < INSTANCES; i++) {
      assert.equal(await statusOf(balancer.url, { key, from: attacker }), 200)
    }
    const statuses: number[] = []
    for (let i = 0; i < 3 * LIMIT; i++) {
      statuses.push(
        await statusOf(balancer.url, {
          key: generateApiKey('production'),
          from: attacker,
          // Forged, a new one each time: HAProxy appends the real address, which is the one used.
          forwardedFor: `198.51.100.${i}`,
        }),
      )
    }
    const unauthorized = statuses.filter((s) => s === 401).length
    // Each instance refuses from the shared count's limit on, learning it at its own next failure.
    assert.ok(
      unauthorized >= LIMIT && unauthorized < LIMIT + INSTANCES,
      `${unauthorized} 401s: ${statuses.join(' ')}`,
    )
    assert.deepEqual(new Set(statuses.slice(LIMIT + INSTANCES)), new Set([429]))
    // Another client behind the same balancer is not refused.
    assert.equal(
      await statusOf(balancer.url, { key: generateApiKey('production'), from: '127.0.0.3' }),
      401,
    )
    // The refused client's valid key still works on both instances.
    for (let i = 0; i < INSTANCES; i++) {
      assert.equal(await statusOf(balancer.url, { key, from: attacker }), 200)
    }
    const logged = services.map((s) => s.stdout()).join('')
    assert.match(logged, /"client":"127\.0\.0\.2"/)
    assert.doesNotMatch(logged, /198\.51\.100\./, 'no forged address was believed')
  })

  test(`a revoked key is refused by both instances within ${KEY_CACHE_MS} ms; a new key works at once`, async () => {
    const revoked = await createKey('to-revoke')
    const direct = services.map((s) => s.url)
    for (const url of direct) {
      assert.equal(await statusOf(url, { key: revoked.key, from: BALANCER }), 200)
    }
    const revoke = await cli('keys', 'revoke', revoked.id)
    assert.equal(revoke.code, 0, revoke.stderr)
    const revokedAt = Date.now()
    const fresh = await createKey('new')
    for (const url of direct) {
      assert.equal(await statusOf(url, { key: fresh.key, from: BALANCER }), 200, 'a new key')
    }
    // The bound, from when the revocation had committed: every answer believed until then
    // was asked of the store before it.
    await delay(Math.max(0, revokedAt + KEY_CACHE_MS - Date.now()))
    for (const url of direct) {
      assert.equal(await statusOf(url, { key: revoked.key, from: BALANCER }), 401, url)
    }
  })
})
