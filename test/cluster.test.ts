// `petstore serve --workers N` (node:cluster): one port served by N worker processes; the
// primary migrates and prints the first-start key once, replaces a worker that dies, and on
// SIGTERM lets every worker drain (D11) and exits 0 with every acknowledged create kept.
//
// Which process answered is read from the JSON logs (each line carries its pid) and the process
// table, never from anything the service adds to its responses.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { get } from 'node:http'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { runMain } from './helpers/in-process.ts'
import { logLines, metricsUrlIn } from './helpers/logs.ts'
import { type ServiceProcess, startService, startServiceOnTerminal } from './helpers/process.ts'
import { parseExposition, sampleValue } from './helpers/prometheus.ts'
import { tempDir } from './helpers/server.ts'

const KEY_LINE = /^ {4}(petstore_live_[0-9A-Za-z]{38})\r?$/gm

const ascending = (a: number, b: number) => a - b

/** Whether a process with this pid exists (signal 0 checks without sending anything). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Pids of the live processes whose parent is `pid`, from the process table. */
async function childrenOf(pid: number): Promise<number[]> {
  const { stdout } = await promisify(execFile)('ps', ['-A', '-o', 'pid=,ppid='])
  return stdout
    .split('\n')
    .map((line) => line.trim().split(/\s+/).map(Number))
    .filter(([, parent]) => parent === pid)
    .map(([child]) => child ?? 0)
    .sort(ascending)
}

/** Waits up to 20 s for `check` to hold, re-reading what it looks at. */
async function eventually(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 20_000
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting until ${what}`)
    await sleep(50)
  }
}

/** Pids of workers that logged "Server listening". */
function listeningPids(service: ServiceProcess): number[] {
  const pids = logLines(service.stdout())
    .filter((line) => /^Server listening at /.test(line.msg ?? ''))
    .map((line) => line.pid)
  return [...new Set(pids)].sort(ascending)
}

/** GET /v1/pets on a connection of its own (no keep-alive), so each may reach another worker. */
function getOnNewConnection(url: string, key: string, requestId: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = get(
      `${url}/v1/pets`,
      { agent: false, headers: { authorization: `Bearer ${key}`, 'x-request-id': requestId } },
      (response) => {
        response.resume()
        response.on('end', () => resolve(response.statusCode ?? 0))
      },
    )
    request.on('error', reject)
  })
}

function post(url: string, key: string, name: string) {
  return fetch(`${url}/v1/pets`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name, categoryId: 1 }),
  })
}

async function listIds(url: string, key: string): Promise<Set<number>> {
  const ids = new Set<number>()
  let next: string | undefined = '/v1/pets?limit=100'
  while (next) {
    const response: Response = await fetch(url + next, {
      headers: { authorization: `Bearer ${key}` },
    })
    assert.equal(response.status, 200)
    for (const pet of (await response.json()) as { id: number }[]) ids.add(pet.id)
    next = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')?.[1]
  }
  return ids
}

describe('petstore serve --workers', () => {
  test('the value is checked: 1 to 256, or auto', async () => {
    // In this process (helpers/in-process.ts): a refused value is found before anything starts.
    const refused = await Promise.all(
      [
        ['--workers', '0'],
        ['--workers', '257'],
        ['--workers', 'two'],
        ['--workers=1.5'],
        ['--workers=-1'],
        ['--workers='],
        ['--workers'],
      ].map(async (args) => ({
        args,
        result: await runMain(['serve', ...args], { DATABASE_URL: 'sqlite::memory:' }),
      })),
    )
    for (const { args, result } of refused) {
      assert.equal(result.code, 2, args.join(' '))
      const first = result.stderr.split('\n')[0] ?? ''
      if (args.length === 1 && args[0] === '--workers') assert.match(first, /--workers/)
      else {
        assert.match(
          first,
          /^petstore: --workers must be a whole number from 1 to 256, or auto \(got "/,
        )
      }
    }
  })

  describe('two workers on one port', () => {
    let dir: Awaited<ReturnType<typeof tempDir>>
    let env: Record<string, string>
    let service: ServiceProcess
    let key = ''
    let workers: number[] = []

    before(async () => {
      dir = await tempDir()
      env = {
        DATABASE_URL: `sqlite:${join(dir.path, 'cluster.db')}`,
        PETSTORE_RATE_LIMIT: '0',
        METRICS_PORT: '0',
      }
      service = await startService(env, ['--workers', '2'])
      await eventually('both workers listen', () => listeningPids(service).length === 2)
      workers = listeningPids(service)
    })
    after(async () => {
      await service?.stop('SIGKILL')
      await dir?.remove()
    })

    test('the primary migrates and, stderr not being a terminal, says once how to make a key', async () => {
      const noKey = () =>
        logLines(service.stdout()).filter((line) => /^no API key exists/.test(line.msg ?? ''))
      // Said once both workers listen, which the primary hears after they say so.
      await eventually('the primary says no key exists', () => noKey().length > 0)
      assert.doesNotMatch(service.stderr(), /petstore_live_/)
      const said = noKey()
      assert.equal(said.length, 1, service.stdout())
      assert.equal(said[0]?.role, 'primary')
      const created = await runMain(['keys', 'create', '--name', 'cluster'], env)
      key = created.stdout.trim()
      assert.match(key, /^petstore_live_/)
    })

    test('two worker processes, children of the primary, answer on the one port', async () => {
      const primary = service.child.pid ?? 0
      assert.deepEqual(await childrenOf(primary), workers)
      assert.ok(!workers.includes(primary))

      const ids = Array.from({ length: 12 }, (_, i) => `cluster-${process.pid}-${i}`)
      for (const id of ids) assert.equal(await getOnNewConnection(service.url, key, id), 200)
      const servedBy = () =>
        new Set(
          logLines(service.stdout())
            .filter((line) => line.msg === 'request completed' && ids.includes(String(line.reqId)))
            .map((line) => line.pid),
        )
      await eventually('every request is logged', () =>
        logLines(service.stdout()).some(
          (line) => line.msg === 'request completed' && line.reqId === ids.at(-1),
        ),
      )
      assert.deepEqual([...servedBy()].sort(ascending), workers)
    })

    test('one scrape of the primary sums both workers (D17)', async () => {
      const url = metricsUrlIn(service.stdout())
      assert.ok(url !== undefined, 'the primary logged its metrics URL')
      const listed = {
        http_request_method: 'GET',
        http_route: '/v1/pets',
        http_response_status_code: '200',
      }
      const count = async () => {
        const response = await fetch(url)
        assert.equal(response.status, 200)
        const families = parseExposition(await response.text())
        return sampleValue(families, 'http_server_request_duration_seconds_count', listed)
      }
      const before = await count()
      const ids = Array.from({ length: 10 }, (_, i) => `scrape-${process.pid}-${i}`)
      for (const id of ids) assert.equal(await getOnNewConnection(service.url, key, id), 200)
      // Both workers answered some of them (each logs the requests it answers, with its pid).
      await eventually('every request is logged', () =>
        logLines(service.stdout()).some(
          (line) => line.msg === 'request completed' && line.reqId === ids.at(-1),
        ),
      )
      const servedBy = new Set(
        logLines(service.stdout())
          .filter((line) => line.msg === 'request completed' && ids.includes(String(line.reqId)))
          .map((line) => line.pid),
      )
      assert.equal(servedBy.size, 2, 'both workers served')
      assert.equal((await count()) - before, ids.length)
      // The API's port has no /metrics, whichever worker answers.
      const onApi = await fetch(`${service.url}/metrics`)
      assert.equal(onApi.status, 404)
      await onApi.arrayBuffer()
    })

    test('a worker that dies is replaced, and the service keeps answering', async () => {
      const [victim, survivor] = workers
      assert.ok(victim && survivor)
      process.kill(victim, 'SIGKILL')
      await eventually('a replacement listens', () => listeningPids(service).length === 3)
      const replacement = listeningPids(service).find((pid) => !workers.includes(pid)) ?? 0
      workers = [survivor, replacement].sort(ascending)
      assert.deepEqual(await childrenOf(service.child.pid ?? 0), workers)
      const died = logLines(service.stdout()).filter(
        (line) => line.workerPid === victim && /exited unexpectedly/.test(line.msg ?? ''),
      )
      assert.equal(died.length, 1)
      assert.equal(died[0]?.msg, 'worker exited unexpectedly; starting a replacement')
      assert.equal(died[0]?.signal, 'SIGKILL')
      assert.equal(await getOnNewConnection(service.url, key, 'after-replacement'), 200)
    })

    test('SIGTERM: every worker drains, exit code 0, no acknowledged create lost', {
      timeout: 60_000,
    }, async () => {
      // SIGTERM once the first create is acknowledged, with the rest still in flight.
      const { promise: firstAcknowledged, resolve: acknowledged } = Promise.withResolvers<void>()
      const inFlight = Array.from({ length: 200 }, (_, i) =>
        post(service.url, key, `cluster drain ${i}`).then(
          async (response) => {
            const { id } = (await response.json()) as { id: number }
            if (response.status === 201) acknowledged()
            return { status: response.status, id }
          },
          () => ({ status: 0, id: 0 }),
        ),
      )
      await firstAcknowledged
      const code = await service.stop('SIGTERM')
      const results = await Promise.all(inFlight)
      assert.equal(code, 0, service.stdout().slice(-2000))
      assert.ok(
        results.every((r) => r.status === 201 || r.status === 0),
        `unexpected statuses: ${[...new Set(results.map((r) => r.status))].join(', ')}`,
      )
      const stopped = logLines(service.stdout()).filter((line) => line.msg === 'shut down cleanly')
      const primary = service.child.pid ?? 0
      assert.deepEqual(
        [...new Set(stopped.map((line) => line.pid))].sort(ascending),
        [...workers, primary].sort(ascending),
      )
      assert.deepEqual(
        workers.filter((pid) => alive(pid)),
        [],
        'a worker outlived the primary',
      )

      const restarted = await startService(env)
      try {
        assert.doesNotMatch(restarted.stderr(), /petstore_live_/)
        const stored = await listIds(restarted.url, key)
        for (const { status, id } of results) {
          if (status === 201) assert.ok(stored.has(id), `pet ${id} was acknowledged but lost`)
        }
      } finally {
        await restarted.stop()
      }
    })
  })

  test('on a terminal the primary makes the first key once every worker listens, and prints it once', async () => {
    const dir = await tempDir()
    try {
      const service = await startServiceOnTerminal(
        { DATABASE_URL: `sqlite:${join(dir.path, 'terminal.db')}`, PETSTORE_RATE_LIMIT: '0' },
        ['--workers', '2'],
      )
      try {
        await eventually(
          'both workers listen and the key is shown',
          () =>
            [...service.output().matchAll(KEY_LINE)].length > 0 &&
            service.output().split('worker listening').length === 3,
        )
        const keys = [...service.output().matchAll(KEY_LINE)].map((match) => match[1] ?? '')
        assert.equal(keys.length, 1, service.output())
        const response = await fetch(`${service.url}/v1/pets`, {
          headers: { authorization: `Bearer ${keys[0]}` },
        })
        assert.equal(response.status, 200)
      } finally {
        assert.equal(await service.stop(), 0)
      }
    } finally {
      await dir.remove()
    }
  })
})
