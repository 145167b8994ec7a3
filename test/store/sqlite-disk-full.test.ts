// D16: the disk under the SQLite database fills up. Creates get 503 `unavailable` saying the disk
// is full (never 500), /readyz turns 503, and the log says so once, not once per request. Once
// space is freed, creates and /readyz recover by themselves, the log says so once, and every pet
// acknowledged with a 201 is there.
//
// A real full disk: a small tmpfs mounted for the test (root only; elsewhere the test is skipped
// with a one-line notice), holding the database and a filler file that takes the rest.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fillDisk } from '../helpers/full-disk.ts'
import { logLines } from '../helpers/logs.ts'
import { type ServiceProcess, startService } from '../helpers/process.ts'
import { tempDir } from '../helpers/server.ts'

interface Pet {
  id: number
  name: string
  categoryId: number
}

const dir = await tempDir()
let skip: string | false = false
try {
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', dir.path], { stdio: 'pipe' })
} catch {
  skip = 'cannot mount a tmpfs here (needs root): the full-disk test is skipped'
  console.log(skip)
  await dir.remove()
}

describe('the database disk fills up, then space is freed', { skip }, () => {
  const key = `disk-test-${randomBytes(16).toString('hex')}`
  const filler = join(dir.path, 'filler')
  let service: ServiceProcess
  const acknowledged: Pet[] = []
  let n = 0

  async function call(path: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers)
    headers.set('authorization', `Bearer ${key}`)
    if (init.body !== undefined) headers.set('content-type', 'application/json')
    return fetch(service.url + path, { ...init, headers })
  }

  /** One create; its pet is kept when acknowledged. */
  async function create(): Promise<Response> {
    const name = `pet ${n++}`
    const response = await call('/v1/pets', {
      method: 'POST',
      body: JSON.stringify({ name, categoryId: 1 }),
    })
    if (response.status === 201) acknowledged.push((await response.clone().json()) as Pet)
    return response
  }

  /** The service's log lines about the database (not the per-request ones). */
  const databaseLines = () =>
    logLines(service.stdout()).filter((line) => /^the database/.test(line.msg ?? ''))

  before(async () => {
    service = await startService({
      DATABASE_URL: `sqlite:${join(dir.path, 'petstore.db')}`,
      PETSTORE_API_KEYS: key,
      PETSTORE_RATE_LIMIT: '0',
    })
  })
  after(async () => {
    await service?.stop()
    rmSync(filler, { force: true })
    execFileSync('umount', [dir.path])
    await dir.remove()
  })

  test('creates get 503 saying the disk is full; /readyz 503; one log line', async () => {
    for (let i = 0; i < 10; i++) assert.equal((await create()).status, 201)
    fillDisk(filler)

    let full: Response | undefined
    for (let i = 0; i < 2000 && full === undefined; i++) {
      const response = await create()
      if (response.status !== 201) full = response
    }
    assert.ok(full, 'creates kept succeeding on a full disk')
    assert.equal(full.status, 503)
    assert.equal(full.headers.get('retry-after'), '10')
    assert.deepEqual(await full.json(), {
      code: 'unavailable',
      message: "the database's disk is full; retry later",
      status: 503,
    })
    // Many more, at once: the same answer, and still one log line.
    const more = await Promise.all(Array.from({ length: 50 }, create))
    assert.deepEqual(new Set(more.map((response) => response.status)), new Set([503]))

    const ready = await fetch(`${service.url}/readyz`)
    assert.equal(ready.status, 503)
    assert.equal(ready.headers.get('retry-after'), '10')
    assert.match(((await ready.json()) as { message: string }).message, /disk is full/)
    assert.equal((await fetch(`${service.url}/healthz`)).status, 200)
    const list = await call('/v1/pets?limit=1')
    assert.equal(list.status, 200, 'reads go on')
    await list.arrayBuffer()

    await sleep(100) // the child's log lines reach its pipe
    const lines = databaseLines()
    assert.equal(lines.length, 1, JSON.stringify(lines))
    assert.match(lines[0]?.msg ?? '', /the database fails/)
    assert.equal(lines[0]?.reason, "the database's disk is full")
    assert.equal((lines[0]?.err as { errcode?: number } | undefined)?.errcode, 13, 'SQLITE_FULL')
    const perRequest = logLines(service.stdout()).filter((line) => line.err !== undefined)
    assert.equal(perRequest.length, 1, 'no error line per request, only the outage line')
  })

  test('space freed: /readyz and creates recover by themselves; one log line', async () => {
    rmSync(filler)
    const ready = await fetch(`${service.url}/readyz`)
    assert.equal(ready.status, 200, 'readiness proves a write and recovers')
    await ready.arrayBuffer()
    for (let i = 0; i < 10; i++) assert.equal((await create()).status, 201)

    await sleep(100)
    const lines = databaseLines()
    assert.deepEqual(
      lines.map((line) => line.msg),
      [
        'the database fails; requests that need it are answered 503 unavailable',
        'the database works again',
      ],
    )
    assert.ok(Number(lines[1]?.failedOperations) > 50, 'the recovery line counts the failures')
  })

  test('every pet acknowledged with a 201 is there', async () => {
    const stored = new Map<number, Pet>()
    let path: string | undefined = '/v1/pets?limit=7'
    while (path !== undefined) {
      const response = await call(path)
      assert.equal(response.status, 200)
      for (const pet of (await response.json()) as Pet[]) stored.set(pet.id, pet)
      path = /<([^>]+)>;\s*rel="next"/.exec(response.headers.get('link') ?? '')?.[1]
    }
    assert.ok(acknowledged.length >= 20)
    for (const pet of acknowledged) assert.deepEqual(stored.get(pet.id), pet)
    assert.equal(stored.size, acknowledged.length, 'no pet answered 503 was stored')
  })
})
