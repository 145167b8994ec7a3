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
