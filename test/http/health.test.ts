// D1/D11: /healthz (alive) and /readyz (store reachable, not draining), both without auth.
import assert from 'node:assert/strict'
import { after, afterEach, before, describe, it } from 'node:test'
import type { Store } from '../../src/store/store.ts'
import { failingStore } from '../helpers/failing-store.ts'
import {
  createPet,
  errorOf,
  openTestStore,
  startServer,
  type TestServer,
  type TestStore,
} from '../helpers/server.ts'

describe('health and readiness (D1, D11)', () => {
  let server: TestServer

  before(async () => {
    server = await startServer()
  })
  after(() => server.close())
  afterEach(() => {
    server.lifecycle.draining = false
  })

  it('/healthz is 200 without a key', async () => {
    const response = await fetch(`${server.url}/healthz`)
    assert.equal(response.status, 200)
    assert.match(response.headers.get('content-type') ?? '', /^application\/json/)
    assert.deepEqual(await response.json(), { status: 'ok' })
  })

  it('/readyz is 200 without a key', async () => {
    const response = await fetch(`${server.url}/readyz`)
    assert.equal(response.status, 200)
    assert.deepEqual(await response.json(), { status: 'ready' })
  })

  it('the probes ignore a wrong key (they are not authenticated at all)', async () => {
    for (const path of ['/healthz', '/readyz']) {
      const response = await fetch(server.url + path, {
        headers: { authorization: 'Bearer definitely-not-a-key' },
      })
      assert.equal(response.status, 200, path)
      assert.equal(response.headers.get('www-authenticate'), null)
      await response.body?.cancel()
    }
  })

  it('the probes answer HEAD', async () => {
    for (const path of ['/healthz', '/readyz']) {
      const response = await fetch(server.url + path, { method: 'HEAD' })
      assert.equal(response.status, 200, path)
    }
  })

  it('the probes live at the root, not under /v1', async () => {
    for (const path of ['/v1/healthz', '/v1/readyz']) {
      const response = await server.request(path)
      assert.equal(response.status, 404, path)
      await response.body?.cancel()
    }
  })

  it('while draining, /readyz is 503 unavailable and /healthz stays 200', async () => {
    server.lifecycle.draining = true
    const ready = await fetch(`${server.url}/readyz`)
    assert.equal(ready.status, 503)
    const body = await errorOf(ready)
    assert.equal(body.code, 'unavailable')
    assert.match(body.message, /shutting down/)
    assert.ok(ready.headers.get('x-request-id'))
    assert.equal(ready.headers.get('retry-after'), '1', 'a 503 says when to retry, as every 503')

    const alive = await fetch(`${server.url}/healthz`)
    assert.equal(alive.status, 200)
    await alive.body?.cancel()

    // In-flight and new API requests are still served while draining (D11).
    const api = await server.request('/v1/pets')
    assert.equal(api.status, 200)
    await api.body?.cancel()
  })

  it('readiness comes back when draining ends', async () => {
    server.lifecycle.draining = true
    const draining = await fetch(`${server.url}/readyz`)
    assert.equal(draining.status, 503)
    await draining.body?.cancel()
    server.lifecycle.draining = false
    const ready = await fetch(`${server.url}/readyz`)
    assert.equal(ready.status, 200)
    await ready.body?.cancel()
  })
})

describe('readiness with an unreachable store', () => {
  const INTERNAL = 'connect ECONNREFUSED 10.1.2.3:5432 user=petstore password=hunter2'
  let database: TestStore
  let real: Store
  let server: TestServer
  let pingFails = true

  before(async () => {
    database = await openTestStore()
    real = database.store
    const flaky = failingStore(real, {
      ping: async () => {
        if (pingFails) throw new Error(INTERNAL)
        await real.ping()
      },
    })
    server = await startServer({ store: flaky })
  })
  after(async () => {
    await server.close()
    await database.close()
  })

  it('/readyz is 503 unavailable without internals', async () => {
    pingFails = true
    const response = await fetch(`${server.url}/readyz`)
    assert.equal(response.status, 503)
    assert.equal(response.headers.get('retry-after'), '1')
    const text = await response.clone().text()
    const body = await errorOf(response)
    assert.equal(body.code, 'unavailable')
    for (const leak of [/ECONNREFUSED/, /10\.1\.2\.3/, /hunter2/, /password/, /:\d+:\d+/]) {
      assert.doesNotMatch(text, leak)
    }
  })

  it('/healthz stays 200: the process is alive', async () => {
    pingFails = true
    const response = await fetch(`${server.url}/healthz`)
    assert.equal(response.status, 200)
    await response.body?.cancel()
  })

  it('/readyz recovers once the store answers again', async () => {
    pingFails = false
    const response = await fetch(`${server.url}/readyz`)
    assert.equal(response.status, 200)
    assert.deepEqual(await response.json(), { status: 'ready' })
  })
})

describe('readiness with a closed store', () => {
  it('/readyz is 503 once the real store is closed', async () => {
    const database = await openTestStore()
    const store = database.store
    const server = await startServer({ store })
    try {
      assert.equal((await fetch(`${server.url}/readyz`)).status, 200)
      await store.close()
      const response = await fetch(`${server.url}/readyz`)
      assert.equal(response.status, 503)
      assert.equal((await errorOf(response)).code, 'unavailable')
    } finally {
      await server.close()
      await database.close()
    }
  })
})

describe('closing while a request is in flight (D11)', () => {
  it('the request is answered with Connection: close and the server closes without waiting out keep-alive', {
    // A regression would hold close() for the 72 s keep-alive timeout; fail well before that.
    timeout: 15_000,
  }, async () => {
    const database = await openTestStore()
    const real = database.store
    let entered: () => void = () => {}
    const createEntered = new Promise<void>((resolve) => {
      entered = resolve
    })
    let release: () => void = () => {}
    const gate = new Promise<void>((resolve) => {
      release = resolve
    })
    const held = failingStore(real, {
      pets: {
        create: async (pet) => {
          entered()
          await gate
          return real.pets.create(pet)
        },
      },
    })
    const server = await startServer({ store: held })
    try {
      const response = createPet(server, { name: 'in flight', categoryId: 1 })
      await createEntered
      server.lifecycle.draining = true
      const closed = server.app.close()
      release()
      const answered = await response
      assert.equal(answered.status, 201)
      assert.equal(answered.headers.get('connection'), 'close')
      await answered.body?.cancel()
      await closed
    } finally {
      await server.close()
      await database.close()
    }
  })
})
