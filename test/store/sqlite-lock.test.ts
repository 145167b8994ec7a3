// D16: another process holding the SQLite write lock (the CLI, `sqlite3` in a shell, another
// instance) must not freeze the service. A create waits for the lock in short tries on timers,
// so /healthz, /readyz and reads keep answering meanwhile; the create commits once the lock is
// released, or gets 503 `unavailable` at its deadline with nothing stored.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { openSqliteStore } from '../../src/store/sqlite.ts'
import { runCli } from '../helpers/process.ts'
import { createPet, errorOf, startServer, type TestServer, tempDir } from '../helpers/server.ts'

/** The latency the issue allows /healthz while a create waits for a lock. */
const HEALTHZ_WITHIN_MS = 100

// A second process that takes the write lock (BEGIN IMMEDIATE), says so, and releases it after
// `ms` (or when its stdin closes).
const HOLDER = `
const { DatabaseSync } = require('node:sqlite')
const db = new DatabaseSync(process.argv[1])
db.exec('BEGIN IMMEDIATE')
process.stdout.write('locked\\n')
const release = () => { db.exec('COMMIT'); db.close(); process.exit(0) }
setTimeout(release, Number(process.argv[2]))
`

interface Holder {
  child: ChildProcess
  released: Promise<unknown>
}

async function holdLock(path: string, ms: number): Promise<Holder> {
  const child = spawn(process.execPath, ['-e', HOLDER, path, String(ms)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const released = once(child, 'exit')
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('locked')) resolve()
    })
    child.on('exit', (code) => reject(new Error(`the lock holder exited (${code}) before locking`)))
  })
  return { child, released }
}

async function timedGet(url: string): Promise<{ status: number; ms: number }> {
  const started = performance.now()
  const response = await fetch(url)
  await response.arrayBuffer()
  return { status: response.status, ms: performance.now() - started }
}

async function petsNamed(server: TestServer, name: string): Promise<unknown[]> {
  const response = await server.request('/v1/pets?limit=100')
  assert.equal(response.status, 200)
  return ((await response.json()) as { name: string }[]).filter((pet) => pet.name === name)
}

describe('a SQLite write lock held by another process', () => {
  let dir: Awaited<ReturnType<typeof tempDir>>

  before(async () => {
    dir = await tempDir()
  })
  after(() => dir.remove())

  test('for 3 s: /healthz, /readyz and reads answer meanwhile; the create commits after', {
    timeout: 20_000,
  }, async () => {
    const path = join(dir.path, 'held.db')
    const store = openSqliteStore({ path })
    const server = await startServer({ store })
    try {
      // A connection already open, so that the timings below are the server's, not TCP's.
      await timedGet(`${server.url}/healthz`)
      const holder = await holdLock(path, 3000)
      const create = createPet(server, { name: 'waited for the lock', categoryId: 1 })

      const healthz: number[] = []
      // More creates join the queue while it waits; each is committed once, after the lock.
      const later: Promise<Response>[] = []
      let reads = 0
      const until = Date.now() + 2000
      while (Date.now() < until) {
        later.push(createPet(server, { name: `queued ${later.length}`, categoryId: 2 }))
        const probe = await timedGet(`${server.url}/healthz`)
        assert.equal(probe.status, 200)
        healthz.push(probe.ms)
        assert.equal((await timedGet(`${server.url}/readyz`)).status, 200)
        const list = await server.request('/v1/pets')
        assert.equal(list.status, 200)
        await list.arrayBuffer()
        reads += 1
        await sleep(50)
      }
      assert.ok(reads > 5, `${reads} rounds of reads while the lock was held`)
      // A blocked event loop delays every probe made while it waits (each took about 5 s
      // before). A busy machine delays one request now and then with no lock at all (measured:
      // 1 probe in 400 over 100 ms, at a load of 6.7 on 2 cores), so one such probe is let pass.
      const slow = healthz.filter((ms) => ms >= HEALTHZ_WITHIN_MS)
      assert.ok(
        slow.length <= 1 && Math.max(...healthz) < 5 * HEALTHZ_WITHIN_MS,
        `/healthz took ${healthz.map(Math.round).join(', ')} ms while a create waited for the lock`,
      )

      const response = await create
      assert.equal(response.status, 201, 'the create commits once the lock is released')
      const pet = (await response.json()) as { id: number }
      await holder.released
      assert.deepEqual(await petsNamed(server, 'waited for the lock'), [
        { id: pet.id, name: 'waited for the lock', categoryId: 1 },
      ])
      const queued = await Promise.all(later)
      assert.deepEqual(new Set(queued.map((r) => r.status)), new Set([201]))
      for (let i = 0; i < queued.length; i++) {
        assert.equal((await petsNamed(server, `queued ${i}`)).length, 1, `queued ${i} stored once`)
      }
    } finally {
      await server.close()
      await store.close()
    }
  })

  test('past the deadline: 503 unavailable with Retry-After, nothing stored; then it recovers', {
    timeout: 20_000,
  }, async () => {
    const path = join(dir.path, 'deadline.db')
    // A deadline of 1 s instead of the default 5 s, so that the test takes seconds.
    const store = openSqliteStore({ path, lockTimeoutMs: 1000 })
    const server = await startServer({ store })
    try {
      const holder = await holdLock(path, 2500)
      const create = createPet(server, { name: 'gave up', categoryId: 1 })
      assert.equal((await timedGet(`${server.url}/healthz`)).status, 200)
      const response = await create
      assert.equal(response.status, 503)
      assert.equal(response.headers.get('retry-after'), '1')
      const body = await errorOf(response)
      assert.equal(body.code, 'unavailable')
      assert.match(body.message, /locked by another process/)

      await holder.released
      assert.deepEqual(await petsNamed(server, 'gave up'), [], 'a 503 create is not stored')
      assert.equal((await timedGet(`${server.url}/readyz`)).status, 200)
      const again = await createPet(server, { name: 'after the lock', categoryId: 1 })
      assert.equal(again.status, 201)
    } finally {
      await server.close()
      await store.close()
    }
  })

  test('keys create from the CLI waits out a lock held for a second', {
    timeout: 20_000,
  }, async () => {
    const path = join(dir.path, 'cli.db')
    const env = { DATABASE_URL: `sqlite:${path}`, LOG_LEVEL: 'warn' }
    assert.equal((await runCli(['migrate'], env)).code, 0)
    const holder = await holdLock(path, 1000)
    const created = await runCli(['keys', 'create', '--name', 'during a lock'], env)
    assert.equal(created.code, 0, created.stderr)
    await holder.released
    const listed = await runCli(['keys', 'list'], env)
    assert.match(listed.stdout, /during a lock/)
  })
})
