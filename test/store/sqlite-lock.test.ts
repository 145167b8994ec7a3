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
import { openSqliteStore } from '../../src/store/sqlite/store.ts'
import { runCli } from '../helpers/process.ts'
import { createPet, errorOf, startServer, type TestServer, tempDir } from '../helpers/server.ts'

// A second process that takes the write lock (BEGIN IMMEDIATE), says so, and releases it when
// its stdin closes (the test says when), or after `ms` when given.
const HOLDER = `
const { DatabaseSync } = require('node:sqlite')
const db = new DatabaseSync(process.argv[1])
db.exec('BEGIN IMMEDIATE')
process.stdout.write('locked\\n')
const release = () => { db.exec('COMMIT'); db.close(); process.exit(0) }
process.stdin.on('end', release).resume()
if (process.argv[2]) setTimeout(release, Number(process.argv[2]))
`

interface Holder {
  child: ChildProcess
  /** Commits and ends the holder; resolves once it has exited. */
  release(): Promise<unknown>
  released: Promise<unknown>
}

async function holdLock(path: string, ms?: number): Promise<Holder> {
  const child = spawn(process.execPath, ['-e', HOLDER, path, ...(ms ? [String(ms)] : [])], {
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const released = once(child, 'exit')
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('locked')) resolve()
    })
    child.on('exit', (code) => reject(new Error(`the lock holder exited (${code}) before locking`)))
  })
  return {
    child,
    released,
    release() {
      child.stdin?.end()
      return released
    },
  }
}

async function statusOf(url: string): Promise<number> {
  const response = await fetch(url)
  await response.arrayBuffer()
  return response.status
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

  test('while it is held: /healthz, /readyz and reads answer, the create waits; it commits after', {
    timeout: 20_000,
  }, async () => {
    const path = join(dir.path, 'held.db')
    // A deadline far beyond the rounds below, however busy the machine: the create must still
    // be waiting when they end.
    const store = openSqliteStore({ path, lockTimeoutMs: 60_000 })
    const server = await startServer({ store })
    try {
      const holder = await holdLock(path)
      let createSettled = false
      const create = createPet(server, { name: 'waited for the lock', categoryId: 1 }).finally(
        () => {
          createSettled = true
        },
      )

      // More creates join the queue while it waits; each is committed once, after the lock.
      const later: Promise<Response>[] = []
      for (let round = 0; round < 6; round++) {
        later.push(createPet(server, { name: `queued ${later.length}`, categoryId: 2 }))
        assert.equal(await statusOf(`${server.url}/healthz`), 200)
        assert.equal(await statusOf(`${server.url}/readyz`), 200)
        const list = await server.request('/v1/pets')
        assert.equal(list.status, 200)
        await list.arrayBuffer()
        await sleep(20)
      }
      // Answered while the create still waits: a wait that blocked the event loop would answer
      // them only once the create had given up or committed.
      assert.equal(createSettled, false, 'the create was answered while the lock was held')

      await holder.release()
      const response = await create
      assert.equal(response.status, 201, 'the create commits once the lock is released')
      const pet = (await response.json()) as { id: number }
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
    // A deadline of 300 ms instead of the default 5 s, so that the test waits for less.
    const store = openSqliteStore({ path, lockTimeoutMs: 300 })
    const server = await startServer({ store })
    try {
      const holder = await holdLock(path)
      const create = createPet(server, { name: 'gave up', categoryId: 1 })
      assert.equal(await statusOf(`${server.url}/healthz`), 200)
      const response = await create
      assert.equal(response.status, 503)
      assert.equal(response.headers.get('retry-after'), '1')
      const body = await errorOf(response)
      assert.equal(body.code, 'unavailable')
      assert.match(body.message, /locked by another process/)

      await holder.release()
      assert.deepEqual(await petsNamed(server, 'gave up'), [], 'a 503 create is not stored')
      assert.equal(await statusOf(`${server.url}/readyz`), 200)
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
