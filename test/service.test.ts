// The service as a process: first start, restart on the same file, graceful shutdown (D3, D10, D11).
import assert from 'node:assert/strict'
import { type AddressInfo, createServer } from 'node:net'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { after, before, describe, test } from 'node:test'
import { generateApiKey } from '../src/contract/api-key.ts'
import { runMain } from './helpers/in-process.ts'
import { logLines } from './helpers/logs.ts'
import {
  type ServiceProcess,
  spawnOnTerminal,
  startService,
  startServiceOnTerminal,
  type TerminalService,
  waitForOutput,
} from './helpers/process.ts'
import { tempDir } from './helpers/server.ts'

const KEY_LINE = /^ {4}(petstore_live_[0-9A-Za-z]{38})\r?$/m

function post(service: { url: string }, key: string, name: string) {
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
  let dbFile: string
  let env: Record<string, string>

  before(async () => {
    dir = await tempDir()
    dbFile = join(dir.path, 'service.db')
    env = {
      DATABASE_URL: `sqlite:${dbFile}`,
      LOG_LEVEL: 'info',
      PETSTORE_RATE_LIMIT: '0',
    }
  })
  // A start costs most of a second of CPU, so a test leaves the service it started on the file
  // running where the next one needs one started as it was: the second start on a terminal is
  // the one the restart test makes its pets on, and that test's restart the one the SIGTERM test
  // stops. Stopped here if a test failed before it stopped it.
  let secondStart: TerminalService | undefined
  let restart: ServiceProcess | undefined
  after(async () => {
    await secondStart?.stop()
    await restart?.stop()
    await dir.remove()
  })

  let key = ''

  test('the first start on a terminal creates a key and prints it once', async () => {
    const first = await startServiceOnTerminal(env)
    try {
      await waitForOutput(first.output, KEY_LINE)
      key = KEY_LINE.exec(first.output())?.[1] ?? ''
      assert.ok(key, `no key printed:\n${first.output()}`)
      const logLines = first
        .output()
        .split('\r\n')
        .filter((line) => line.startsWith('{'))
      assert.ok(logLines.length > 0)
      assert.ok(!logLines.some((line) => line.includes(key)), 'the key never reaches the JSON logs')
      // As the README says: after every log line of the start, ports bound, never between them.
      const output = first.output()
      const banner = output.indexOf('No API key existed, so one was created.')
      const listening = output.indexOf('Server listening at')
      const lastMigration = output.lastIndexOf('applied migration')
      assert.ok(lastMigration >= 0 && lastMigration < listening && listening < banner, output)
      const response = await fetch(`${first.url}/v1/pets`, {
        headers: { authorization: `Bearer ${key}` },
      })
      assert.equal(response.status, 200)
    } finally {
      assert.equal(await first.stop(), 0)
    }
    secondStart = await startServiceOnTerminal(env)
    assert.doesNotMatch(
      secondStart.output(),
      /petstore_live_/,
      'a key is printed only on the first start',
    )
  })

  test('a restart on the same SQLite file keeps every pet', async () => {
    // The pets are made on the test before's second start, on this file.
    const service = secondStart
    assert.ok(service, 'the second start of the test before runs')
    secondStart = undefined
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
    restart = await startService(env)
    const listed = await listAll(restart, key)
    for (const pet of created) assert.ok(listed.some((p) => p.id === pet.id && p.name === pet.name))
  })

  test('SIGTERM: in-flight creates finish, every 201 is kept, exit code 0', async () => {
    // The restart of the test before, on this file: the creates are made on it, then its SIGTERM.
    const service = restart
    assert.ok(service, 'the restart of the test before runs')
    restart = undefined
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
    // Read from the file the process left, as the signals test does (the test before has shown
    // a restart reading what was kept): no third start on the file.
    const db = new DatabaseSync(dbFile, { readOnly: true })
    try {
      const stored = new Set(
        db
          .prepare('SELECT id FROM pets')
          .all()
          .map((row) => Number(row.id)),
      )
      for (const { pet } of accepted)
        assert.ok(pet && stored.has(pet.id), `pet ${pet?.id} acknowledged but lost`)
    } finally {
      db.close()
    }
  })
})

describe('petstore serve: the first key and the logs (D3)', () => {
  let dir: Awaited<ReturnType<typeof tempDir>>
  before(async () => {
    dir = await tempDir()
  })
  after(() => dir.remove())

  const fresh = (name: string) => ({
    DATABASE_URL: `sqlite:${join(dir.path, `${name}.db`)}`,
    PETSTORE_RATE_LIMIT: '0',
  })

  test('where stderr is not a terminal (a container, a service manager) no key is made', async () => {
    const env = fresh('logs')
    const service = await startService(env)
    try {
      await waitForOutput(service.stdout, /no API key exists/)
      assert.doesNotMatch(service.stderr(), /petstore_live_/)
      const said = logLines(service.stdout()).filter((line) => line.level === 40)
      const noKey = said.find((line) => /no API key exists/.test(String(line.msg)))
      assert.ok(noKey, service.stdout())
      assert.match(String(noKey.msg), /petstore keys create --name NAME/)
      assert.match(String(noKey.msg), /docker exec <container> petstore keys create/)
    } finally {
      assert.equal(await service.stop(), 0)
    }
    const listed = await runMain(['keys', 'list'], env)
    assert.equal(listed.stdout, 'No API keys.\n')
  })

  test('a start that fails on a port in use spends no key; the next start shows one', async () => {
    const env = fresh('port-in-use')
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
    const { port } = taken.address() as AddressInfo
    try {
      const failed = spawnOnTerminal(['serve'], {
        ...env,
        PORT: '0',
        HOST: '127.0.0.1',
        METRICS_PORT: String(port),
      })
      assert.equal(await failed.exited, 1, failed.output())
      assert.match(failed.output(), /the port is in use \(METRICS_PORT\)/)
      assert.doesNotMatch(failed.output(), /petstore_live_/)
    } finally {
      taken.close()
    }
    assert.equal((await runMain(['keys', 'list'], env)).stdout, 'No API keys.\n')
    const next = await startServiceOnTerminal(env)
    try {
      await waitForOutput(next.output, KEY_LINE)
    } finally {
      assert.equal(await next.stop(), 0)
    }
  })

  test('a key of PETSTORE_API_KEYS without a prefix is named once at start, by its id', async () => {
    const opaque = 'operator-chosen-secret-0123456789abcdef'
    const structured = generateApiKey('production')
    const service = await startService({
      ...fresh('opaque'),
      PETSTORE_API_KEYS: `${opaque},${structured}`,
    })
    try {
      assert.ok(!service.stdout().includes(opaque) && !service.stderr().includes(opaque))
      const said = logLines(service.stdout()).filter((line) =>
        /has no petstore_live_ or petstore_staging_ prefix/.test(String(line.msg)),
      )
      assert.equal(said.length, 1, service.stdout())
      assert.match(String(said[0]?.keyId), /^env_[0-9a-f]{12}$/)
      assert.match(String(said[0]?.msg), /petstore keys create --name NAME/)
    } finally {
      await service.stop()
    }
  })
})
