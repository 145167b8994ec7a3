// D12: a per-key budget in one-minute windows, stated on every authenticated response in the
// draft-10 fields; over it, 429 rate_limited with Retry-After.
import assert from 'node:assert/strict'
import { after, before, beforeEach, describe, it } from 'node:test'
import { issueApiKey } from '../../src/keys/issue.ts'
import { createPet, errorOf, ManualClock, startServer, type TestServer } from '../helpers/server.ts'

const QUOTA = 3
const POLICY = `"default";q=${QUOTA};w=60`
const MINUTE = 60_000

/** Parses `"default";r=<remaining>;t=<seconds>`. */
function parseRateLimit(value: string | null): { r: number; t: number } {
  const match = /^"default";r=(\d+);t=(\d+)$/.exec(value ?? '')
  assert.ok(match, `RateLimit is ${JSON.stringify(value)}`)
  return { r: Number(match[1]), t: Number(match[2]) }
}

describe('rate limit (D12)', () => {
  const clock = new ManualClock(Date.UTC(2027, 0, 1, 0, 0, 0))
  let server: TestServer

  /** Moves the clock into a fresh window, `offset` seconds after its start. */
  function freshWindow(offset: number): void {
    const start = (Math.floor(clock.now() / MINUTE) + 1) * MINUTE
    clock.set(start + offset * 1000)
  }

  before(async () => {
    server = await startServer({ rateLimit: QUOTA, clock })
  })
  after(() => server.close())
  beforeEach(() => freshWindow(15))

  it('states the budget on each success, then answers 429 with Retry-After', async () => {
    for (const remaining of [2, 1, 0]) {
      const response = await server.request('/v1/pets')
      assert.equal(response.status, 200)
      assert.equal(response.headers.get('ratelimit-policy'), POLICY)
      assert.deepEqual(parseRateLimit(response.headers.get('ratelimit')), { r: remaining, t: 45 })
      assert.equal(response.headers.get('retry-after'), null)
      await response.body?.cancel()
    }

    const limited = await server.request('/v1/pets')
    assert.equal(limited.status, 429)
    assert.equal(limited.headers.get('ratelimit-policy'), POLICY)
    assert.deepEqual(parseRateLimit(limited.headers.get('ratelimit')), { r: 0, t: 45 })
    const retryAfter = limited.headers.get('retry-after') ?? ''
    assert.match(retryAfter, /^\d+$/)
    assert.equal(Number(retryAfter), 45)
    const body = await errorOf(limited)
    assert.equal(body.code, 'rate_limited')
    assert.ok(limited.headers.get('x-request-id'))
  })

  it('t and Retry-After count down to the end of the window', async () => {
    for (let i = 0; i < QUOTA; i++) await (await server.request('/v1/pets')).body?.cancel()
    clock.advance(30_500) // 45.5 s into the window: 14.5 s left, stated as 15
    const limited = await server.request('/v1/pets')
    assert.equal(limited.status, 429)
    assert.equal(limited.headers.get('retry-after'), '15')
    assert.deepEqual(parseRateLimit(limited.headers.get('ratelimit')), { r: 0, t: 15 })
    await limited.body?.cancel()

    clock.advance(14_499) // 1 ms before the window ends: still limited, never Retry-After: 0
    const last = await server.request('/v1/pets')
    assert.equal(last.status, 429)
    assert.ok(Number(last.headers.get('retry-after')) > 0)
    await last.body?.cancel()
  })

  it('a new minute restores the budget', async () => {
    for (let i = 0; i < QUOTA; i++) await (await server.request('/v1/pets')).body?.cancel()
    const limited = await server.request('/v1/pets')
    assert.equal(limited.status, 429)
    const retryAfter = Number(limited.headers.get('retry-after'))
    await limited.body?.cancel()

    clock.advance(retryAfter * 1000) // exactly when Retry-After said
    const again = await server.request('/v1/pets')
    assert.equal(again.status, 200)
    assert.deepEqual(parseRateLimit(again.headers.get('ratelimit')), { r: 2, t: 60 })
    await again.body?.cancel()
  })

  it('every operation and every outcome counts against the same budget', async () => {
    const list = await server.request('/v1/pets?limit=0') // 400, still counted
    assert.equal(list.status, 400)
    assert.equal(parseRateLimit(list.headers.get('ratelimit')).r, 2)
    await list.body?.cancel()

    const get = await server.request('/v1/pets/999999') // 404
    assert.equal(get.status, 404)
    assert.equal(parseRateLimit(get.headers.get('ratelimit')).r, 1)
    assert.equal(get.headers.get('ratelimit-policy'), POLICY)
    await get.body?.cancel()

    const create = await createPet(server, { name: 'Counted', categoryId: 1 })
    assert.equal(create.status, 201)
    assert.equal(parseRateLimit(create.headers.get('ratelimit')).r, 0)
    await create.body?.cancel()

    const getLimited = await server.request('/v1/pets/1')
    assert.equal(getLimited.status, 429)
    assert.equal((await errorOf(getLimited)).code, 'rate_limited')
  })

  it('keys have independent budgets', async () => {
    const second = await issueApiKey(server.store.apiKeys, 'production', 'second')
    const asSecond = { headers: { authorization: `Bearer ${second.key}` } }

    for (let i = 0; i < QUOTA; i++) await (await server.request('/v1/pets')).body?.cancel()
    const firstLimited = await server.request('/v1/pets')
    assert.equal(firstLimited.status, 429)
    await firstLimited.body?.cancel()

    for (const remaining of [2, 1, 0]) {
      const response = await server.request('/v1/pets', asSecond)
      assert.equal(response.status, 200)
      assert.equal(parseRateLimit(response.headers.get('ratelimit')).r, remaining)
      await response.body?.cancel()
    }
    const secondLimited = await server.request('/v1/pets', asSecond)
    assert.equal(secondLimited.status, 429)
    await secondLimited.body?.cancel()
  })

  it('unauthenticated requests neither consume the budget nor state it', async () => {
    for (let i = 0; i < QUOTA + 2; i++) {
      const response = await fetch(`${server.url}/v1/pets`)
      assert.equal(response.status, 401)
      assert.equal(response.headers.get('ratelimit'), null)
      assert.equal(response.headers.get('ratelimit-policy'), null)
      await response.body?.cancel()
    }
    const response = await server.request('/v1/pets')
    assert.equal(response.status, 200)
    assert.equal(parseRateLimit(response.headers.get('ratelimit')).r, 2)
    await response.body?.cancel()
  })

  it('health probes are not rate limited', async () => {
    for (let i = 0; i < QUOTA + 2; i++) {
      const response = await fetch(`${server.url}/healthz`)
      assert.equal(response.status, 200)
      assert.equal(response.headers.get('ratelimit'), null)
      await response.body?.cancel()
    }
  })

  it('a 429 on POST creates no pet', async () => {
    for (let i = 0; i < QUOTA; i++) await (await server.request('/v1/pets')).body?.cancel()
    const name = `Refused-${Date.now()}`
    const refused = await createPet(server, { name, categoryId: 9 })
    assert.equal(refused.status, 429)
    assert.equal(refused.headers.get('location'), null)
    assert.equal((await errorOf(refused)).code, 'rate_limited')

    freshWindow(0)
    let afterId = 0
    for (;;) {
      const page = await server.store.pets.list({ limit: 100, afterId })
      assert.ok(!page.pets.some((pet) => pet.name === name), 'the refused pet was stored')
      const last = page.pets.at(-1)
      if (!page.hasMore || last === undefined) break
      afterId = last.id
    }
    const listed = await server.request('/v1/pets?limit=100')
    assert.equal(listed.status, 200)
    const pets = (await listed.json()) as { name: string }[]
    assert.ok(!pets.some((pet) => pet.name === name))
  })
})

describe('rate limit off (quota 0)', () => {
  let server: TestServer

  before(async () => {
    server = await startServer({ rateLimit: 0 })
  })
  after(() => server.close())

  it('sends no RateLimit fields and never answers 429', async () => {
    for (let i = 0; i < 25; i++) {
      const response = await server.request('/v1/pets')
      assert.equal(response.status, 200)
      assert.equal(response.headers.get('ratelimit'), null)
      assert.equal(response.headers.get('ratelimit-policy'), null)
      assert.equal(response.headers.get('retry-after'), null)
      await response.body?.cancel()
    }
    const created = await createPet(server, { name: 'Unlimited', categoryId: 1 })
    assert.equal(created.status, 201)
    assert.equal(created.headers.get('ratelimit'), null)
    const missing = await server.request('/v1/pets/999999')
    assert.equal(missing.status, 404)
    assert.equal(missing.headers.get('ratelimit-policy'), null)
    await missing.body?.cancel()
  })
})
