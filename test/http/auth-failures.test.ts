// D3: failed authentications are limited per client address. After the limit's 401s in a
// minute, that address's requests get 429 with Retry-After and the draft-10 fields, and the store
// is not asked; a key the process knows valid still works. The address is the peer's, or from
// X-Forwarded-For only behind a trusted hop. Counts are shared through Redis. Store look-ups are
// counted at the store, and time is moved by hand.
import assert from 'node:assert/strict'
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import { after, before, describe, it } from 'node:test'
import { generateApiKey } from '../../src/contract/api-key.ts'
import { issueApiKey } from '../../src/keys/issue.ts'
import { AUTH_FAILURES_NAMESPACE, addressKey } from '../../src/rate-limit/auth-failures.ts'
import { clientAddress, trustedHops } from '../../src/rate-limit/client-address.ts'
import type { WindowCounter } from '../../src/rate-limit/counter.ts'
import { RedisWindowCounter } from '../../src/rate-limit/redis.ts'
import { failingStore } from '../helpers/failing-store.ts'
import {
  adminClient,
  deleteKeys,
  describeWithRedis,
  REDIS_URL,
  uniquePrefix,
} from '../helpers/redis.ts'
import {
  ManualClock,
  openTestStore,
  startServer,
  type TestServer,
  type TestStore,
} from '../helpers/server.ts'

const LIMIT = 5
/** The start of a one-minute window, so that no test crosses one by accident. */
const WINDOW_START = Date.UTC(2026, 10, 27, 12, 0, 0)

interface Answer {
  status: number
  headers: IncomingHttpHeaders
  body: { code?: string; message?: string }
}

/** GET /v1/pets from a chosen local address, with a chosen key and X-Forwarded-For. */
function send(
  server: TestServer,
  options: { key?: string; from?: string; forwardedFor?: string } = {},
): Promise<Answer> {
  const url = new URL(server.url)
  const headers: Record<string, string> = {}
  if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`
  if (options.forwardedFor !== undefined) headers['x-forwarded-for'] = options.forwardedFor
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: '/v1/pets',
        headers,
        localAddress: options.from ?? '127.0.0.1',
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: JSON.parse(Buffer.concat(chunks).toString() || '{}') as Answer['body'],
          }),
        )
      },
    )
    req.on('error', reject)
    req.end()
  })
}

/** A live key with its checksum's last character changed: malformed, whatever it was. */
function corruptKey(): string {
  const key = generateApiKey('production')
  return key.slice(0, -1) + (key.endsWith('0') ? '1' : '0')
}

async function failTimes(server: TestServer, times: number, from?: string): Promise<number[]> {
  const statuses: number[] = []
  for (let i = 0; i < times; i++) {
    const answer = await send(server, {
      key: generateApiKey('production'),
      ...(from ? { from } : {}),
    })
    statuses.push(answer.status)
  }
  return statuses
}

describe('failed authentications: limited per client address', () => {
  const clock = new ManualClock(WINDOW_START)
  let server: TestServer

  before(async () => {
    server = await startServer({ clock, authFailureLimit: LIMIT, metrics: true })
  })
  after(() => server.close())

  it(`${LIMIT} 401s, then 429 with Retry-After and the limit's fields, without asking the store`, async () => {
    // The server's key, used before the flood: known valid to this process.
    assert.equal((await send(server, { key: server.key })).status, 200)
    clock.set(WINDOW_START + 15_000)
    assert.deepEqual(await failTimes(server, LIMIT), Array(LIMIT).fill(401))
    const lookupsBefore = server.keyLookups()
    for (let i = 0; i < 20; i++) {
      const refused = await send(server, { key: generateApiKey('production') })
      assert.equal(refused.status, 429)
      assert.equal(refused.body.code, 'rate_limited')
      assert.equal(
        refused.body.message,
        `too many failed authentications from this address: ${LIMIT} in 60 s; retry in 45 s`,
      )
      assert.equal(refused.headers['retry-after'], '45')
      assert.equal(refused.headers['ratelimit-policy'], `"auth-failures";q=${LIMIT};w=60`)
      assert.equal(refused.headers.ratelimit, '"auth-failures";r=0;t=45')
      assert.equal(refused.headers['www-authenticate'], undefined)
    }
    assert.equal(server.keyLookups(), lookupsBefore, 'no key was looked up for a refused address')
  })

  it('from a refused address, a guess is 429; a request without a key or with a key wrong by its form is told so', async () => {
    assert.equal((await send(server, { key: 'not-a-key-of-any-environment' })).status, 429)
    const missing = await send(server)
    assert.equal(missing.status, 401)
    assert.match(missing.body.message ?? '', /an API key is required/)
    const corrupt = corruptKey()
    const malformed = await send(server, { key: corrupt })
    assert.equal(malformed.status, 401)
    assert.equal(malformed.body.message, 'the API key is malformed')
    const staging = await send(server, { key: generateApiKey('staging') })
    assert.equal(staging.status, 401)
    assert.equal(staging.body.message, 'the API key is a staging key; this is production')
  })

  it('a key this process knows valid still works from the refused address', async () => {
    const answer = await send(server, { key: server.key })
    assert.equal(answer.status, 200)
  })

  it('requests without a key, or with one wrong by its form, are not counted', async () => {
    const from = '127.0.0.4'
    for (let i = 0; i < 2 * LIMIT; i++) {
      assert.equal((await send(server, { from })).status, 401)
      const corrupt = corruptKey()
      assert.equal((await send(server, { from, key: corrupt })).status, 401)
      assert.equal((await send(server, { from, key: generateApiKey('staging') })).status, 401)
    }
    assert.equal((await send(server, { from, key: generateApiKey('production') })).status, 401)
  })

  it('another address is not refused', async () => {
    assert.equal((await send(server, { key: 'not-a-key', from: '127.0.0.2' })).status, 401)
  })

  it('the refusal ends with the window, and metrics count the 429s and the look-ups', async () => {
    clock.set(WINDOW_START + 60_000)
    assert.equal((await send(server, { key: generateApiKey('production') })).status, 401)
    assert.ok(server.metricsUrl !== undefined)
    const text = await (await fetch(server.metricsUrl)).text()
    assert.match(text, /^petstore_auth_failure_limited_total 21$/m)
    assert.match(text, /^petstore_api_key_lookups_total\{result="unknown"\} 7$/m)
    // The server's key: verified before the flood, and again from the refused address, its answer
    // having outlived the bound (a key seen valid is worth one look-up; no other token is).
    assert.match(text, /^petstore_api_key_lookups_total\{result="active"\} 2$/m)
  })
})

describe('failed authentications: guesses in flight count', () => {
  const clock = new ManualClock(WINDOW_START)
  const waiting: (() => void)[] = []
  let testStore: TestStore
  let server: TestServer

  before(async () => {
    testStore = await openTestStore()
    // Every look-up waits until the test lets it go, as on a busy database.
    const real = testStore.store.apiKeys
    const held = failingStore(testStore.store, {
      apiKeys: {
        findActiveByHash: (hash) =>
          new Promise((resolve) => waiting.push(() => resolve(real.findActiveByHash(hash)))),
      },
    })
    server = await startServer({ store: held, clock, authFailureLimit: LIMIT })
  })
  after(async () => {
    await server.close()
    await testStore.close()
  })

  /** Resolves once `count` look-ups have been asked for. */
  async function lookupsAsked(count: number): Promise<void> {
    while (server.keyLookups() < count) await new Promise((resolve) => setImmediate(resolve))
  }

  it(`${4 * LIMIT} guesses at once: ${LIMIT} are looked up, the others refused 429 at once`, async () => {
    const answers = Array.from({ length: 4 * LIMIT }, () =>
      send(server, { key: generateApiKey('production'), from: '127.0.0.5' }),
    )
    await lookupsAsked(LIMIT)
    const refused = await Promise.all(answers.slice(LIMIT))
    assert.deepEqual(new Set(refused.map((a) => a.status)), new Set([429]))
    for (const release of waiting.splice(0)) release()
    const looked = await Promise.all(answers.slice(0, LIMIT))
    assert.deepEqual(new Set(looked.map((a) => a.status)), new Set([401]))
    assert.equal(server.keyLookups(), LIMIT)
  })

  it('requests with one new key at once are one look-up, and none is refused', async () => {
    const { key } = await issueApiKey(server.store.apiKeys, 'production', 'busy')
    const answers = Array.from({ length: 4 * LIMIT }, () =>
      send(server, { key, from: '127.0.0.6' }),
    )
    const before = server.keyLookups()
    await lookupsAsked(before + 1)
    for (const release of waiting.splice(0)) release()
    const statuses = (await Promise.all(answers)).map((a) => a.status)
    assert.deepEqual(new Set(statuses), new Set([200]))
    assert.equal(server.keyLookups(), before + 1)
  })
})

describe('failed authentications: a counter that fails lets failures go uncounted', () => {
  let failing = true
  const counter: WindowCounter = {
    hit: async () => {
      if (failing) throw new Error('the counter is unreachable')
      return 1
    },
    close: async () => {},
  }
  let server: TestServer
  before(async () => {
    server = await startServer({
      authFailureLimit: LIMIT,
      authFailureCounter: counter,
      metrics: true,
    })
  })
  after(() => server.close())

  const gauge = async () => {
    assert.ok(server.metricsUrl !== undefined)
    const text = await (await fetch(server.metricsUrl)).text()
    return /^petstore_auth_failure_counter_fail_open (\d)$/m.exec(text)?.[1]
  }

  it('fails open: every guess is a 401, and the gauge says so until the counter answers', async () => {
    assert.deepEqual(await failTimes(server, 2 * LIMIT), Array(2 * LIMIT).fill(401))
    assert.equal(await gauge(), '1')
    failing = false
    assert.deepEqual(await failTimes(server, 1), [401])
    assert.equal(await gauge(), '0')
  })
})

describe('failed authentications: the address behind a balancer', () => {
  const clock = new ManualClock(WINDOW_START)
  const servers: TestServer[] = []
  after(async () => {
    for (const server of servers) await server.close()
  })

  it('X-Forwarded-For from an address that is not a trusted hop is ignored', async () => {
    const server = await startServer({
      clock,
      authFailureLimit: LIMIT,
      trustedProxies: ['10.9.9.9'],
    })
    servers.push(server)
    for (let i = 0; i < LIMIT; i++) {
      const answer = await send(server, { key: 'not-a-key', forwardedFor: `198.51.100.${i}` })
      assert.equal(answer.status, 401)
    }
    const forged = await send(server, { key: 'not-a-key', forwardedFor: '198.51.100.200' })
    assert.equal(forged.status, 429, 'every forged address counted as the peer it came from')
  })

  it('behind a trusted hop, each client address counts on its own', async () => {
    const server = await startServer({
      clock,
      authFailureLimit: LIMIT,
      trustedProxies: ['127.0.0.3'],
    })
    servers.push(server)
    const viaBalancer = (client: string) =>
      send(server, { key: 'not-a-key', from: '127.0.0.3', forwardedFor: client })
    for (let i = 0; i < LIMIT; i++) assert.equal((await viaBalancer('198.51.100.7')).status, 401)
    assert.equal((await viaBalancer('198.51.100.7')).status, 429)
    assert.equal((await viaBalancer('198.51.100.8')).status, 401, 'another client behind it')
    // A client's own header, in front of the balancer's, chooses nothing.
    const spoofed = await viaBalancer('203.0.113.1, 198.51.100.7')
    assert.equal(spoofed.status, 429)
  })

  /** 8 wrong keys through a trusted balancer at 127.0.0.1 that writes each client's port. */
  async function throughPortWriter(trustedProxies: string[], forwardedFor: (i: number) => string) {
    const server = await startServer({ clock, authFailureLimit: LIMIT, trustedProxies })
    servers.push(server)
    const statuses: number[] = []
    for (let i = 1; i <= 8; i++) {
      const answer = await send(server, { key: 'not-a-key', forwardedFor: forwardedFor(i) })
      statuses.push(answer.status)
    }
    return { server, statuses }
  }
  const REACHED = [...Array<number>(LIMIT).fill(401), ...Array<number>(8 - LIMIT).fill(429)]

  it('a balancer that writes the port: an IPv4 client is one address whatever its port', async () => {
    const { server, statuses } = await throughPortWriter(
      ['127.0.0.1'],
      (i) => `9.9.7.1:${1000 + i}`,
    )
    assert.deepEqual(statuses, REACHED, 'counted as 9.9.7.1, not as 9.9.7.1:1001…1008')
    const other = await send(server, { key: 'not-a-key', forwardedFor: '9.9.7.2:1001' })
    assert.equal(other.status, 401, 'another client behind it')
  })

  it('a balancer that writes the port: an IPv6 client, [v6]:port or [v6], is one address', async () => {
    const { server, statuses } = await throughPortWriter(
      ['127.0.0.1'],
      (i) => `[2001:db8::7]:${1000 + i}`,
    )
    assert.deepEqual(statuses, REACHED)
    for (const spelling of ['[2001:db8::7]', '2001:db8::7']) {
      const again = await send(server, { key: 'not-a-key', forwardedFor: spelling })
      assert.equal(again.status, 429, spelling)
    }
  })

  it('behind two balancers that write ports, the walk back passes the inner one', async () => {
    // The outer balancer wrote the client, the inner one (10.0.0.5, trusted) was appended after.
    const { server, statuses } = await throughPortWriter(
      ['127.0.0.1', '10.0.0.0/8'],
      (i) => `9.9.7.1:${1000 + i}, 10.0.0.5:${40000 + i}`,
    )
    assert.deepEqual(statuses, REACHED)
    const other = await send(server, { key: 'not-a-key', forwardedFor: '9.9.7.2:1, 10.0.0.5:2' })
    assert.equal(other.status, 401, 'not every client counted as the inner balancer')
  })
})

describe('failed authentications: what counts as one address', () => {
  it('IPv4 as it is, IPv4-mapped IPv6 as IPv4, IPv6 by its /64', () => {
    assert.equal(addressKey('192.0.2.1'), '192.0.2.1')
    assert.equal(addressKey('::ffff:192.0.2.1'), '192.0.2.1')
    assert.equal(addressKey('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64')
    assert.equal(addressKey('2001:DB8:1:2::99'), '2001:db8:1:2::/64')
    assert.equal(addressKey('2001:0db8:0001:0002:ffff::1'), '2001:db8:1:2::/64')
    assert.equal(addressKey('2001:db8::1'), '2001:db8:0:0::/64')
    assert.equal(addressKey('::1'), '0:0:0:0::/64')
    assert.equal(addressKey('fe80::1%eth0'), 'fe80:0:0:0::/64')
    assert.equal(addressKey('64:ff9b::192.0.2.1'), '64:ff9b:0:0::/64')
    // Every spelling of an IPv4-mapped address is the IPv4 address.
    assert.equal(addressKey('::ffff:102:304'), '1.2.3.4')
    assert.equal(addressKey('0:0:0:0:0:ffff:1.2.3.4'), '1.2.3.4')
    assert.equal(addressKey('::FFFF:0102:0304'), '1.2.3.4')
  })

  it('the port a balancer may write is set aside; a bare IPv6 address keeps its colons', () => {
    const cases = {
      '9.9.7.1:1001': '9.9.7.1',
      '[2001:db8::7]:1001': '2001:db8::7',
      '[2001:db8::7]': '2001:db8::7',
      '[fe80::1%eth0]:80': 'fe80::1%eth0',
      '2001:db8::1': '2001:db8::1',
      '::ffff:192.0.2.1': '::ffff:192.0.2.1',
      '::1': '::1',
      '192.0.2.1': '192.0.2.1',
      // Not an address with a port: as written.
      'host.example:80': 'host.example:80',
      '1.2.3.4:': '1.2.3.4:',
      '1.2.3.4:80:90': '1.2.3.4:80:90',
      '[2001:db8::7]:': '[2001:db8::7]:',
      '[2001:db8::7': '[2001:db8::7',
      '[1.2.3.4]:80': '[1.2.3.4]:80',
      unknown: 'unknown',
    }
    for (const [written, address] of Object.entries(cases)) {
      assert.equal(clientAddress({ ip: written }), address, written)
    }
    assert.equal(clientAddress({ ip: undefined }), undefined)
  })

  it('a trusted hop is never a peer already gone: Fastify asks with its undefined address', () => {
    const trusted = trustedHops(['127.0.0.1', '10.0.0.0/8'])
    assert.equal(trusted('10.0.0.5:4711'), true)
    assert.equal(trusted(undefined), false)
  })

  it('what is not an address is counted as written, never as another client', () => {
    assert.equal(addressKey('1.2.3.4:5678'), '1.2.3.4:5678')
    assert.equal(addressKey('[2001:db8::1]'), '[2001:db8::1]')
    assert.equal(addressKey('unknown'), 'unknown')
    assert.equal(addressKey(undefined), '')
  })
})

await describeWithRedis('failed authentications: counted in Redis, shared by instances', () => {
  const clock = new ManualClock(WINDOW_START)
  const prefix = uniquePrefix()
  const admin = adminClient()
  const counters: RedisWindowCounter[] = []
  const servers: TestServer[] = []

  before(async () => {
    for (let i = 0; i < 2; i++) {
      const counter = new RedisWindowCounter({ url: REDIS_URL, prefix, commandTimeoutMs: 5000 })
      assert.equal(await counter.whenReady(2000), true)
      counters.push(counter)
      servers.push(
        await startServer({
          clock,
          authFailureLimit: LIMIT,
          authFailureCounter: counter.sibling(AUTH_FAILURES_NAMESPACE),
        }),
      )
    }
  })
  after(async () => {
    for (const server of servers) await server.close()
    for (const counter of counters) await counter.close()
    await deleteKeys(admin, prefix)
    await admin.quit()
  })

  it('failures on one instance count on the other', async () => {
    const [a, b] = servers as [TestServer, TestServer]
    assert.deepEqual(await failTimes(a, 3), [401, 401, 401])
    // b reaches the shared limit with its second failure, and refuses from then on.
    assert.deepEqual(await failTimes(b, 3), [401, 401, 429])
    // a learns it at its next failure: the shared count is already past the limit.
    assert.deepEqual(await failTimes(a, 2), [401, 429])
    const window = Math.floor(WINDOW_START / 60_000)
    const key = (counters[0] as RedisWindowCounter)
      .sibling(AUTH_FAILURES_NAMESPACE)
      .keyFor('127.0.0.1', window, 60)
    assert.equal(key, `${prefix}authfail:60:${window}:127.0.0.1`)
    assert.equal(await admin.get(key), '6')
  })
})
