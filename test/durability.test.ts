// D10 after the speed work (group commit): a 201 is sent only once the pet is committed, so a
// process killed outright (SIGKILL: no shutdown, no flush) while creates are in flight loses
// none that were acknowledged.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { startService } from './helpers/process.ts'
import { tempDir } from './helpers/server.ts'

const KEY = 'durability-test-key-0123456789abcdefghij'
const CLIENTS = 32

interface Acknowledged {
  id: number
  name: string
}

describe('durability (D10)', () => {
  let dir: Awaited<ReturnType<typeof tempDir>>
  let env: Record<string, string>

  before(async () => {
    dir = await tempDir()
    env = {
      DATABASE_URL: `sqlite:${join(dir.path, 'durability.db')}`,
      PETSTORE_API_KEYS: KEY,
      PETSTORE_RATE_LIMIT: '0',
    }
  })
  after(() => dir.remove())

  test('SIGKILL while creates are in flight: every pet that got a 201 is there after a restart', async () => {
    const service = await startService(env)
    const acknowledged: Acknowledged[] = []
    let failed = 0

    // Clients that each send creates back to back until the process is gone.
    const client = async (c: number) => {
      for (let i = 0; ; i++) {
        const name = `durable ${c}-${i}`
        let response: Response
        try {
          response = await fetch(`${service.url}/v1/pets`, {
            method: 'POST',
            headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
            body: JSON.stringify({ name, categoryId: c + 1, status: 'pending' }),
          })
        } catch {
          failed++ // the connection died with the process: this create was in flight
          return
        }
        assert.equal(response.status, 201)
        const pet = (await response.json()) as Acknowledged
        assert.equal(pet.name, name)
        acknowledged.push(pet)
      }
    }
    const clients = Array.from({ length: CLIENTS }, (_, c) => client(c))

    // Kill once a few hundred creates are acknowledged, with every client mid-request.
    while (acknowledged.length < 300) await new Promise((resolve) => setTimeout(resolve, 5))
    service.child.kill('SIGKILL')
    await service.exited
    await Promise.all(clients)
    assert.ok(failed > 0, 'the kill caught creates in flight')

    const restarted = await startService(env)
    try {
      const stored = new Map<number, string>()
      let next: string | undefined = '/v1/pets?limit=100'
      while (next !== undefined) {
        const response: Response = await fetch(restarted.url + next, {
          headers: { authorization: `Bearer ${KEY}` },
        })
        assert.equal(response.status, 200)
        for (const pet of (await response.json()) as Acknowledged[]) stored.set(pet.id, pet.name)
        next = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')?.[1]
      }
      for (const pet of acknowledged) {
        assert.equal(stored.get(pet.id), pet.name, `pet ${pet.id} got a 201 but is not there`)
      }
    } finally {
      await restarted.stop()
    }
  })
})

// D14 with D10: clients that retry every create that got no answer (or a 503) with the same
// Idempotency-Key until a 201 comes, across a SIGKILL and a restart, make exactly one pet per
// logical create: the pets committed before the kill whose 201 never left are replayed.
describe('durability with retries (D10, D14)', () => {
  let dir: Awaited<ReturnType<typeof tempDir>>
  let env: Record<string, string>

  before(async () => {
    dir = await tempDir()
    env = {
      DATABASE_URL: `sqlite:${join(dir.path, 'retries.db')}`,
      PETSTORE_API_KEYS: KEY,
      PETSTORE_RATE_LIMIT: '0',
    }
  })
  after(() => dir.remove())

  test('SIGKILL mid-creates, retried with the same key: one pet per logical create', async (t) => {
    let service = await startService(env)
    /** Where requests go now; replaced by a promise of the restarted service's URL at the kill. */
    let live: Promise<string> = Promise.resolve(service.url)
    const acknowledged = new Map<string, Acknowledged>()
    let retried = 0
    let replayed = 0
    let stopping = false

    const createUntil201 = async (name: string, key: string, categoryId: number) => {
      for (;;) {
        const url = await live
        let response: Response
        try {
          response = await fetch(`${url}/v1/pets`, {
            method: 'POST',
            headers: {
              authorization: `Bearer ${KEY}`,
              'content-type': 'application/json',
              'idempotency-key': key,
            },
            body: JSON.stringify({ name, categoryId }),
          })
        } catch {
          retried++ // no answer: the process died; the same key goes to the restarted one
          await new Promise((resolve) => setTimeout(resolve, 20))
          continue
        }
        if (response.status === 503 || response.status === 409) {
          await response.body?.cancel()
          retried++
          continue
        }
        assert.equal(response.status, 201)
        if (response.headers.get('idempotent-replayed') === 'true') replayed++
        const pet = (await response.json()) as Acknowledged
        assert.equal(pet.name, name)
        return pet
      }
    }
    const client = async (c: number) => {
      for (let i = 0; !stopping; i++) {
        const name = `retried ${c}-${i}`
        acknowledged.set(name, await createUntil201(name, `retry-${c}-${i}`, c + 1))
      }
    }
    const clients = Array.from({ length: CLIENTS }, (_, c) => client(c))

    while (acknowledged.size < 300) await new Promise((resolve) => setTimeout(resolve, 5))
    let restarted!: (url: string) => void
    live = new Promise((resolve) => {
      restarted = resolve
    })
    service.child.kill('SIGKILL')
    await service.exited
    service = await startService(env)
    restarted(service.url)
    const atRestart = acknowledged.size
    while (acknowledged.size < atRestart + 200) {
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    stopping = true
    await Promise.all(clients)
    try {
      assert.ok(retried > 0, 'the kill caught creates in flight, which were retried')
      const counts = new Map<string, number>()
      let next: string | undefined = '/v1/pets?limit=100'
      while (next !== undefined) {
        const response: Response = await fetch(service.url + next, {
          headers: { authorization: `Bearer ${KEY}` },
        })
        assert.equal(response.status, 200)
        for (const pet of (await response.json()) as Acknowledged[]) {
          counts.set(pet.name, (counts.get(pet.name) ?? 0) + 1)
        }
        next = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')?.[1]
      }
      assert.equal(counts.size, acknowledged.size, 'no pet without a logical create')
      for (const [name, pet] of acknowledged) {
        assert.equal(counts.get(name), 1, `${name} (id ${pet.id}) is there exactly once`)
      }
      // How many were committed before the kill with their 201 lost, then replayed.
      t.diagnostic(`retries ${retried}, replays ${replayed}, creates ${acknowledged.size}`)
    } finally {
      await service.stop()
    }
  })
})
