// The service as a process: first start, restart on the same file, graceful shutdown (D3, D10, D11).
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type ServiceProcess, startService } from './helpers/process.ts'
import { tempDir } from './helpers/server.ts'

const KEY_LINE = /^ {4}(petstore_live_[0-9A-Za-z]{38})$/m

function post(service: ServiceProcess, key: string, name: string) {
  return fetch(`${service.url}/v1/pets`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name, categoryId: 1, status: 'available' }),
  })
}

async function listAll(
  service: ServiceProcess,
  key: string,
): Promise<{ id: number; name: string }[]> {
  const pets: { id: number; name: string }[] = []
  let next: string | undefined = '/v1/pets?limit=100'
  while (next) {
    const response: Response = await fetch(service.url + next, {
      headers: { authorization: `Bearer ${key}` },
    })
    assert.equal(response.status, 200)
    pets.push(...((await response.json()) as { id: number; name: string }[]))
    next = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')?.[1]
  }
  return pets
}

describe('petstore serve', () => {
  let dir: Awaited<ReturnType<typeof tempDir>>
  let env: Record<string, string>

  before(async () => {
    dir = await tempDir()
    env = {
      DATABASE_URL: `sqlite:${join(dir.path, 'service.db')}`,
      LOG_LEVEL: 'info',
      PETSTORE_RATE_LIMIT: '0',
    }
  })
  after(() => dir.remove())

  let key = ''

  test('the first start with no key creates one and prints it once', async () => {
    const first = await startService(env)
    try {
      key = KEY_LINE.exec(first.stderr())?.[1] ?? ''
      assert.ok(key, `no key printed:\n${first.stderr()}`)
      assert.ok(!first.stdout().includes(key), 'the key never reaches the JSON logs')
      const response = await fetch(`${first.url}/v1/pets`, {
        headers: { authorization: `Bearer ${key}` },
      })
      assert.equal(response.status, 200)
    } finally {
      assert.equal(await first.stop(), 0)
    }
    const second = await startService(env)
    try {
      assert.doesNotMatch(
        second.stderr(),
        /petstore_live_/,
        'a key is printed only on the first start',
      )
    } finally {
      await second.stop()
    }
  })

  test('a restart on the same SQLite file keeps every pet', async () => {
    const service = await startService(env)
    let created: { id: number; name: string }[]
    try {
      created = await Promise.all(
        Array.from({ length: 100 }, async (_, i) => {
          const response = await post(service, key, `restart ${i}`)
          assert.equal(response.status, 201)
          return (await response.json()) as { id: number; name: string }
        }),
      )
    } finally {
      await service.stop()
    }
    const restarted = await startService(env)
    try {
      const listed = await listAll(restarted, key)
      for (const pet of created)
        assert.ok(listed.some((p) => p.id === pet.id && p.name === pet.name))
    } finally {
      await restarted.stop()
    }
  })

  test('SIGTERM: in-flight creates finish, every 201 is kept, exit code 0', async () => {
    const service = await startService(env)
    const inFlight = Array.from({ length: 200 }, (_, i) =>
      post(service, key, `drain ${i}`).then(
        async (response) => ({
          status: response.status,
          pet: (await response.json()) as { id: number },
        }),
        () => ({ status: 0, pet: undefined }),
      ),
    )
    await new Promise((resolve) => setTimeout(resolve, 5))
    const code = await service.stop('SIGTERM')
    const results = await Promise.all(inFlight)
    assert.equal(code, 0)
    assert.match(service.stdout(), /shut down cleanly/)
    const accepted = results.filter((r) => r.status === 201)
    assert.ok(
      results.every((r) => r.status === 201 || r.status === 0),
      'no request failed with an error status',
    )
    const restarted = await startService(env)
    try {
      const listed = new Set((await listAll(restarted, key)).map((p) => p.id))
      for (const { pet } of accepted)
        assert.ok(pet && listed.has(pet.id), `pet ${pet?.id} acknowledged but lost`)
    } finally {
      await restarted.stop()
    }
  })
})
