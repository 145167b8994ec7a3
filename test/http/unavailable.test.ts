// D4: a database that cannot be reached is a retryable 503 `unavailable`, never a 500.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { type Store, StoreUnavailableError } from '../../src/store/store.ts'
import { failingStore } from '../helpers/failing-store.ts'
import {
  createPet,
  errorOf,
  openTestStore,
  startServer,
  type TestServer,
  type TestStore,
} from '../helpers/server.ts'

describe('database unreachable', () => {
  let server: TestServer
  let database: TestStore
  let real: Store

  before(async () => {
    database = await openTestStore()
    real = database.store
    await real.migrate()
    const unreachable = () =>
      Promise.reject(new StoreUnavailableError('connect ECONNREFUSED 10.0.0.9:5432'))
    const store = failingStore(real, {
      pets: {
        create: unreachable,
        createIdempotent: unreachable,
        purgeIdempotencyRecords: unreachable,
        get: unreachable,
        list: unreachable,
      },
      ping: unreachable,
    })
    server = await startServer({ store })
  })
  after(async () => {
    await server.close()
    await database.close()
  })

  for (const [name, send] of [
    ['listPets', (s: TestServer) => s.request('/v1/pets')],
    ['createPet', (s: TestServer) => createPet(s, { name: 'Rex', categoryId: 1 })],
    ['getPet', (s: TestServer) => s.request('/v1/pets/1')],
  ] as const) {
    test(`${name} answers 503 unavailable with Retry-After and no internals`, async () => {
      const response = await send(server)
      assert.equal(response.status, 503)
      assert.equal(response.headers.get('retry-after'), '1')
      const body = await errorOf(response)
      assert.equal(body.code, 'unavailable')
      assert.doesNotMatch(body.message, /ECONNREFUSED|10\.0\.0\.9/)
    })
  }
})
