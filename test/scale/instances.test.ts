// Issue 3: several stateless instances, as separate processes, on one PostgreSQL database.
// Creates spread across them all commit with distinct ids, and every instance serves every pet,
// by id and through the list cursor, which any instance can continue.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { createTestDatabase, postgresSkipReason, type TestDatabase } from '../helpers/postgres.ts'
import { type ServiceProcess, startService } from '../helpers/process.ts'
import { boundedPool, call, type Pet, sharedKey, walk } from './support.ts'

const INSTANCES = 3
const CREATES = 1_000
const IN_FLIGHT = 120
const STATUSES = ['available', 'pending', 'sold', undefined] as const

const skip = await postgresSkipReason()

describe('three instances on one PostgreSQL database', { skip }, () => {
  let db: TestDatabase
  let services: ServiceProcess[] = []
  let urls: string[] = []
  const key = sharedKey()
  let created: Pet[] = []

  before(async () => {
    db = await createTestDatabase()
    const env = {
      DATABASE_URL: db.url,
      DATABASE_POOLER: db.pooler,
      PETSTORE_RATE_LIMIT: '0',
      PETSTORE_API_KEYS: key,
    }
    // Started together, so their migrations race; the advisory lock makes them take turns.
    services = await Promise.all(Array.from({ length: INSTANCES }, () => startService(env)))
    urls = services.map((s) => s.url)
  })
  after(async () => {
    const codes = await Promise.all(services.map((s) => s.stop()))
    await db.drop()
    assert.deepEqual(codes, Array(INSTANCES).fill(0), 'every instance shut down cleanly')
  })

  test(`${CREATES} creates round-robin, ${IN_FLIGHT} in flight: all 201, distinct ids`, async () => {
    const { results, maxInFlight } = await boundedPool(CREATES, IN_FLIGHT, async (i) => {
      const status = STATUSES[i % STATUSES.length]
      const body = { name: `pet ${i}`, categoryId: i + 1, ...(status && { status }) }
      const response = await call(urls[i % INSTANCES] as string, key, '/v1/pets', {
        method: 'POST',
        body: JSON.stringify(body),
      })
      const pet = (await response.json()) as Pet
      return { status: response.status, location: response.headers.get('location'), body, pet }
    })
    assert.ok(maxInFlight >= 100, `only ${maxInFlight} creates were in flight together`)
    const failures = results.filter((r) => r.status !== 201)
    assert.equal(failures.length, 0, `not 201: ${JSON.stringify(failures.slice(0, 3))}`)
    for (const { body, pet, location } of results) {
      assert.deepEqual(pet, { id: pet.id, ...body })
      assert.equal(location, `/v1/pets/${pet.id}`)
    }
    created = results.map((r) => r.pet)
    assert.equal(new Set(created.map((p) => p.id)).size, CREATES, 'every id is distinct')
  })

  test('every pet is readable through every instance', async () => {
    assert.equal(created.length, CREATES)
    const reads = INSTANCES * CREATES
    const { results } = await boundedPool(reads, 100, async (n) => {
      const pet = created[n % CREATES] as Pet
      const response = await call(
        urls[Math.floor(n / CREATES)] as string,
        key,
        `/v1/pets/${pet.id}`,
      )
      return { status: response.status, expected: pet, got: (await response.json()) as Pet }
    })
    for (const { status, expected, got } of results) {
      assert.equal(status, 200, `getPet ${expected.id}`)
      assert.deepEqual(got, expected)
    }
  })

  test('walking the cursor from each instance lists every pet exactly once, in id order', async () => {
    const expected = [...created].sort((a, b) => a.id - b.id)
    for (const url of urls) {
      assert.deepEqual(await walk([url], key, '/v1/pets?limit=100'), expected, url)
    }
  })

  test('a cursor made by one instance is continued by the others', async () => {
    const byId = (a: Pet, b: Pet) => a.id - b.id
    // Pages alternate between instances: page 1 from the first, page 2 from the second, …
    assert.deepEqual(await walk(urls, key, '/v1/pets?limit=77'), [...created].sort(byId))
    const pending = created.filter((p) => p.status === 'pending').sort(byId)
    assert.deepEqual(
      await walk([...urls].reverse(), key, '/v1/pets?limit=50&status=pending'),
      pending,
    )
  })
})
