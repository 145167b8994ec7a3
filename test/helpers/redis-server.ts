// A private Redis server for tests that stop it and start it again, which the shared one on
// REDIS_URL (redis.ts) must never be: other test files count on it at the same time. redis-server
// on a free port, keeping nothing on disk, killed and started again on the same port.
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { debianProgram } from './debian-program.ts'
import { freePort } from './free-port.ts'
import { REDIS_REQUIRED } from './redis.ts'

const redisServer = debianProgram({
  name: 'redis-server',
  candidates: ['/usr/bin/redis-server'],
  absent:
    'redis-server is not installed (Debian package redis-server); the tests that stop Redis are skipped',
  required: { variable: 'PETSTORE_REQUIRE_REDIS', set: REDIS_REQUIRED },
})

/** The redis-server binary, or undefined where it is not installed. */
export const redisServerBinary = redisServer.binary
/** Undefined when redis-server is there, else the reason to skip; throws with PETSTORE_REQUIRE_REDIS=1. */
export const redisServerSkipReason = redisServer.skipReason

export interface RedisServer {
  port: number
  /** redis://127.0.0.1:port */
  url: string
  /** Kills it with `signal` (SIGKILL unless given) and waits until it is gone. */
  kill(signal?: NodeJS.Signals): Promise<void>
  /** After kill(): starts it again on the same port, empty, and waits until it answers PING. */
  restart(): Promise<void>
  /** How many keys it holds (DBSIZE); -1 when it does not answer. */
  keyCount(): Promise<number>
  stop(): Promise<void>
}

/** One inline command over a plain socket: the first chunk of its reply, or undefined. */
function ask(port: number, command: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    const done = (reply: string | undefined) => {
      socket.destroy()
      resolve(reply)
    }
    socket.setTimeout(1_000, () => done(undefined))
    socket.once('error', () => done(undefined))
    socket.once('connect', () => socket.write(`${command}\r\n`))
    socket.once('data', (data) => done(data.toString()))
  })
}

/** PING: true on +PONG. */
async function pings(port: number): Promise<boolean> {
  return (await ask(port, 'PING'))?.startsWith('+PONG') ?? false
}

async function waitUntilServing(port: number, child: ChildProcess, log: () => string) {
  const deadline = Date.now() + 10_000
  while (!(await pings(port))) {
    if (child.exitCode !== null) throw new Error(`redis-server exited:\n${log()}`)
    if (Date.now() > deadline) throw new Error(`redis-server did not answer:\n${log()}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** Tries before a start that lost its port to another process counts as failed. */
const START_TRIES = 3

/** Starts a private redis-server; a start whose port was taken in between is retried. */
export async function startRedisServer(): Promise<RedisServer> {
  const binary = redisServerBinary()
  if (binary === undefined) throw new Error(redisServer.absentLine())
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(binary)
    } catch (err) {
      const portTaken = err instanceof Error && /address already in use/i.test(err.message)
      if (!portTaken || attempt === START_TRIES) throw err
    }
  }
}

async function startOnce(binary: string): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-redis-'))
  const port = await freePort()
  let output = ''
  const spawnServer = () => {
    // Nothing on disk (no RDB, no AOF): the tests need a server to lose, not data to keep.
    const child = spawn(
      binary,
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
    )
    const keep = (chunk: Buffer) => {
      output = (output + chunk).slice(-16_000)
    }
    child.stdout?.on('data', keep)
    child.stderr?.on('data', keep)
    return { child, exited: once(child, 'exit') }
  }
  let running = spawnServer()
  const kill = async (signal: NodeJS.Signals = 'SIGKILL') => {
    const { child, exited } = running
    if (child.exitCode === null && child.signalCode === null) child.kill(signal)
    await exited
  }
  const stop = async () => {
    await kill('SIGTERM')
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    await waitUntilServing(port, running.child, () => output)
  } catch (err) {
    await stop()
    throw err
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    kill,
    async restart() {
      await kill()
      running = spawnServer()
      await waitUntilServing(port, running.child, () => output)
    },
    keyCount: async () => Number(/^:(\d+)/.exec((await ask(port, 'DBSIZE')) ?? '')?.[1] ?? -1),
    stop,
  }
}
