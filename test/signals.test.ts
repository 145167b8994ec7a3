// SIGTERM and SIGINT to the process an operator starts, by each command the README gives:
// `node bin/petstore.js serve`, `npm start` and `npx petstore serve` (D11). Each run has a create
// in flight when the signal comes, and checks that it is answered and kept, that the server says
// it shut down cleanly, and that nothing it started is left running or listening.
//
// How the signal is sent, and why:
// - To the PID only (process.kill(pid)): what `docker stop` does to a container's PID 1, and
//   Kubernetes, `kill PID` and systemd's KillMode=mixed to the main process. In a container the
//   kernel kills everything left once PID 1 exits, so a server that outlives the process the
//   operator started is cut off mid-drain; where the started process waits for the server, the
//   test checks that nothing it started runs any more at the moment it exits.
// - To the process group (process.kill(-pid)): a terminal's Ctrl-C, and the nearest thing here to
//   systemd's default KillMode, which signals every process of the service. npm then passes its
//   own copy on too, and the server must still drain once (a second signal means "stop now").
// Each command is started in a process group and session of its own (detached), as a terminal's
// job or a container's processes are, so that a group signal reaches it and nothing else.
//
// `npx petstore serve` is the exception the README states: npm runs it through `sh -c`, which
// npm builds and which cannot `exec`, so a SIGTERM to npx's PID kills that shell and npm exits at
// once; the server notices its parent is gone and drains by itself.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { readdirSync, readFileSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { type LogLine, logLines } from './helpers/logs.ts'
import { BIN, inheritedEnv } from './helpers/process.ts'
import { tempDir } from './helpers/server.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const KEY = `signals-test-key-${'x'.repeat(32)}`
const START_MS = 60_000

type Termination = 'SIGTERM' | 'SIGINT'

interface Case {
  command: string
  file: string
  args: string[]
  signal: Termination
  to: 'pid' | 'group'
  /** How the started process ends: its exit code, or the signal npm re-raises on itself. */
  exit: { code: number } | { signal: Termination }
  /** It waits for the server: nothing it started still runs the moment it exits. */
  waits: boolean
  /** Cluster workers to wait for: a worker still booting dies of the group's signal. */
  workers?: number
}

const NODE = { command: 'node bin/petstore.js serve', file: process.execPath, args: [BIN, 'serve'] }
const NPM_START = { command: 'npm start', file: 'npm', args: ['start'] }
const NPX = { command: 'npx petstore serve', file: 'npx', args: ['petstore', 'serve'] }

const CASES: Case[] = [
  { ...NODE, signal: 'SIGTERM', to: 'pid', exit: { code: 0 }, waits: true },
  { ...NODE, signal: 'SIGINT', to: 'group', exit: { code: 0 }, waits: true },
  { ...NPM_START, signal: 'SIGTERM', to: 'pid', exit: { code: 0 }, waits: true },
  { ...NPM_START, signal: 'SIGINT', to: 'pid', exit: { code: 0 }, waits: true },
  { ...NPM_START, signal: 'SIGTERM', to: 'group', exit: { code: 0 }, waits: true },
  { ...NPM_START, signal: 'SIGINT', to: 'group', exit: { code: 0 }, waits: true },
  // The primary and each worker get the group's signal, and the primary npm's copy too.
  {
    command: 'npm start -- --workers 2',
    file: 'npm',
    args: ['start', '--', '--workers', '2'],
    signal: 'SIGINT',
    to: 'group',
    exit: { code: 0 },
    waits: true,
    workers: 2,
  },
  { ...NPX, signal: 'SIGTERM', to: 'pid', exit: { signal: 'SIGTERM' }, waits: false },
  { ...NPX, signal: 'SIGINT', to: 'group', exit: { signal: 'SIGINT' }, waits: true },
]

/** Whether `pid` runs: it exists and is not a zombie waiting to be reaped. */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z'
  } catch {
    return false
  }
}

/** Every running descendant of `root`, from the process table. */
function descendants(root: number): number[] {
  const children = new Map<number, number[]>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    let stat: string
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
    } catch {
      continue
    }
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    if (state === 'Z') continue
    const siblings = children.get(Number(ppid)) ?? []
    siblings.push(Number(entry))
    children.set(Number(ppid), siblings)
  }
  const found: number[] = []
  const queue = [root]
  for (let pid = queue.shift(); pid !== undefined; pid = queue.shift()) {
    for (const child of children.get(pid) ?? []) {
      found.push(child)
      queue.push(child)
    }
  }
  return found
}

async function eventually(what: string, check: () => boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting until ${what}`)
    await sleep(20)
  }
}

/** What `socket` receives: `until(text)` resolves once `text` has come. */
function reader(socket: Socket) {
  let data = ''
  socket.setEncoding('utf8')
  socket.on('data', (chunk: string) => {
    data += chunk
  })
  socket.on('error', (err) => {
    data += `\n[${err.message}]`
  })
  return {
    received: () => data,
    until: (text: string) =>
      eventually(`the server sends ${JSON.stringify(text)}`, () => data.includes(text)),
  }
}

/** `promise`, or a failure naming `what` after `ms`. */
async function within<T>(what: string, promise: Promise<T>, ms = 15_000): Promise<T> {
  const timeout = sleep(ms, undefined, { ref: false }).then(() =>
    assert.fail(`timed out waiting until ${what}`),
  )
  return Promise.race([promise, timeout])
}

async function refused(port: number): Promise<boolean> {
  const socket = connect(port, '127.0.0.1')
  try {
    await once(socket, 'connect')
    return false
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ECONNREFUSED'
  } finally {
    socket.destroy()
  }
}

interface Started {
  child: ChildProcess
  stdout(): string
  stderr(): string
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** Every process holding the output pipes (npm, its shell, the server) has exited. */
  outputClosed: Promise<unknown>
}

function start(c: Case, env: Record<string, string>): Started {
  const child = spawn(c.file, c.args, {
    cwd: ROOT,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.on('error', (err) => {
    stderr += `\n[${err.message}]`
  })
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk
  })
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk
  })
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited: once(child, 'exit').then(([code, signal]) => ({
      code: code as number | null,
      signal: signal as NodeJS.Signals | null,
    })),
    outputClosed: Promise.all([
      once(child.stdout ?? child, 'end'),
      once(child.stderr ?? child, 'end'),
    ]),
  }
}

/** The server's URL and pid, from its "Server listening" log line. */
async function listening(c: Case, started: Started): Promise<{ url: URL; pid: number }> {
  let line: LogLine | undefined
  await eventually(
    `${c.command} listens`,
    () => {
      if (started.child.exitCode !== null || started.child.signalCode !== null) {
        assert.fail(
          `${c.command} exited before listening:\n${started.stdout()}\n${started.stderr()}`,
        )
      }
      const lines = serverLines(started.stdout())
      line = lines.find((l) => /^Server listening at /.test(l.msg ?? ''))
      const workersListening = lines.filter((l) => l.msg === 'worker listening').length
      return line !== undefined && workersListening >= (c.workers ?? 0)
    },
    START_MS,
  )
  return { url: new URL(/http:\/\/\S+/.exec(line?.msg ?? '')?.[0] ?? ''), pid: line?.pid ?? 0 }
}

/** The server's JSON log lines, without npm's banner and notices. */
function serverLines(stdout: string): LogLine[] {
  return logLines(
    stdout
      .split('\n')
      .filter((line) => line.startsWith('{"'))
      .join('\n'),
  )
}

/** The service's environment: a SQLite file in `dir`, any free port, logs at info. */
function serviceEnv(dir: string, database: string): Record<string, string> {
  return {
    ...inheritedEnv(),
    HOME: process.env.HOME ?? dir,
    DATABASE_URL: `sqlite:${database}`,
    HOST: '127.0.0.1',
    PORT: '0',
    METRICS_PORT: 'off',
    LOG_LEVEL: 'info',
    PETSTORE_API_KEYS: KEY,
    PETSTORE_RATE_LIMIT: '0',
    npm_config_update_notifier: 'false',
  }
}

async function drainCase(c: Case): Promise<void> {
  const dir = await tempDir()
  const database = join(dir.path, 'signals.db')
  const started = start(c, serviceEnv(dir.path, database))
  const launcher = started.child.pid ?? 0
  assert.ok(launcher > 0, `${c.command} could not be started`)
  try {
    const server = await listening(c, started)
    const tree = descendants(launcher)
    assert.ok(
      server.pid === launcher || tree.includes(server.pid),
      `the server (pid ${server.pid}) runs under ${c.command} (pid ${launcher})`,
    )

    // A create whose headers the server has taken (it answers 100 Continue), body not yet sent.
    const body = JSON.stringify({ name: `in flight at ${c.signal}`, categoryId: 1 })
    const socket = connect(Number(server.url.port), server.url.hostname)
    await once(socket, 'connect')
    const response = reader(socket)
    socket.write(
      [
        'POST /v1/pets HTTP/1.1',
        `Host: ${server.url.host}`,
        `Authorization: Bearer ${KEY}`,
        'Content-Type: application/json',
        `Content-Length: ${Buffer.byteLength(body)}`,
        'Expect: 100-continue',
        '',
        '',
      ].join('\r\n'),
    )
    await response.until('HTTP/1.1 100 Continue\r\n\r\n')

    process.kill(c.to === 'pid' ? launcher : -launcher, c.signal)
    const stdout = started.stdout
    await eventually('the server says it is shutting down', () =>
      serverLines(stdout()).some((line) => line.pid === server.pid && line.msg === 'shutting down'),
    )

    socket.end(body)
    await within('the create is answered', new Promise((resolve) => socket.once('close', resolve)))
    const [head = '', payload = ''] = response.received().split('\r\n\r\n').slice(1)
    assert.match(head, /^HTTP\/1\.1 201 /, response.received())
    assert.match(head, /^connection: close$/im, 'answered while draining')
    const pet = JSON.parse(payload) as { id: number; name: string }

    const exit = await within(`${c.command} exits`, started.exited)
    if (c.waits) {
      assert.deepEqual(
        tree.filter(running),
        [],
        `still running when ${c.command} exited: ${tree.filter(running).join(', ')}`,
      )
    }
    assert.deepEqual(
      exit,
      'code' in c.exit
        ? { code: c.exit.code, signal: null }
        : { code: null, signal: c.exit.signal },
    )
    await within('every process holding its output has exited', started.outputClosed)
    await eventually('every process it started has exited', () =>
      tree.every((pid) => !running(pid)),
    )
    assert.ok(await refused(Number(server.url.port)), 'nothing listens on the port any more')

    const lines = serverLines(stdout()).filter((line) => line.pid === server.pid)
    const stopping = lines.filter((line) => line.msg === 'shutting down')
    assert.equal(stopping.length, 1)
    assert.equal(stopping[0]?.signal, c.signal)
    assert.ok(
      lines.some((line) => line.msg === 'shut down cleanly'),
      stdout(),
    )

    const db = new DatabaseSync(database, { readOnly: true })
    try {
      assert.deepEqual(
        { ...db.prepare('SELECT id, name FROM pets WHERE id = ?').get(pet.id) },
        { id: pet.id, name: pet.name },
        'the create answered 201 is stored',
      )
    } finally {
      db.close()
    }
  } finally {
    // Whatever is left of the process group it was started in, npm's orphans included.
    try {
      if (launcher > 0) process.kill(-launcher, 'SIGKILL')
    } catch {
      // ESRCH: nothing is left.
    }
    await dir.remove()
  }
}

describe('a signal to the process the operator started drains the service (D11)', () => {
  for (const c of CASES) {
    const where = c.to === 'pid' ? 'its PID only' : 'its process group'
    test(`${c.command}: ${c.signal} to ${where}`, { timeout: 90_000 }, () => drainCase(c))
  }
})

// `petstore serve 2>&1 | head -2`: once head has its lines it exits, and the service's log pipe
// has no reader. A SIGTERM must still drain it within its drain time, with its usual exit code,
// and what it can no longer write is dropped, not retried (D11). Here the reader goes away just
// after the last line the start logs, so nothing is logged between the pipe closing and the
// signal: the first line that meets the closed pipe is "shutting down", the case that hung.
// Cluster workers inherit the primary's pipes. An output left open must not get an error either.
type Output = 'stdout' | 'stderr'

/** A process that has not exited by then is hung: the drain ends it within DRAIN_MS (10 s). */
const CLOSED_PIPE_EXIT_MS = 30_000

const CLOSED_PIPE_CASES: { c: Case; closed: Output[] }[] = [
  {
    c: { ...NODE, signal: 'SIGTERM', to: 'pid', exit: { code: 0 }, waits: true },
    closed: ['stdout', 'stderr'],
  },
  {
    c: { ...NODE, signal: 'SIGTERM', to: 'pid', exit: { code: 0 }, waits: true },
    closed: ['stdout'],
  },
  {
    c: { ...NODE, signal: 'SIGTERM', to: 'pid', exit: { code: 0 }, waits: true },
    closed: ['stderr'],
  },
  {
    c: {
      command: 'node bin/petstore.js serve --workers 2',
      file: process.execPath,
      args: [BIN, 'serve', '--workers', '2'],
      signal: 'SIGTERM',
      to: 'pid',
      exit: { code: 0 },
      waits: true,
      workers: 2,
    },
    closed: ['stdout', 'stderr'],
  },
]

async function closedPipeCase(c: Case, closed: readonly Output[]): Promise<void> {
  const dir = await tempDir()
  const started = start(c, serviceEnv(dir.path, join(dir.path, 'signals.db')))
  const launcher = started.child.pid ?? 0
  assert.ok(launcher > 0, `${c.command} could not be started`)
  try {
    await listening(c, started)
    const tree = descendants(launcher)
    // The reader goes away, as head does once it has its lines.
    await Promise.all(
      closed.map((name) => {
        const output = started.child[name]
        assert.ok(output !== null)
        const gone = once(output, 'close')
        output.destroy()
        return gone
      }),
    )

    process.kill(launcher, c.signal)
    const exit = await within(
      `${c.command} exits after ${c.signal} with its ${closed.join(' and ')} closed`,
      started.exited,
      CLOSED_PIPE_EXIT_MS,
    )
    assert.deepEqual(exit, { code: 0, signal: null })
    assert.deepEqual(tree.filter(running), [], 'nothing it started runs any more')
    // What it can write it still writes, and an output left open gets no error of the other's.
    if (!closed.includes('stdout')) {
      assert.ok(
        serverLines(started.stdout()).some((line) => line.msg === 'shut down cleanly'),
        started.stdout(),
      )
    }
    if (!closed.includes('stderr')) assert.equal(started.stderr(), '')
  } finally {
    try {
      if (launcher > 0) process.kill(-launcher, 'SIGKILL')
    } catch {
      // ESRCH: nothing is left.
    }
    await dir.remove()
  }
}

describe('a SIGTERM drains a service whose log pipe has no reader (D11)', () => {
  for (const { c, closed } of CLOSED_PIPE_CASES) {
    test(`${c.command}: ${closed.join(' and ')} closed`, { timeout: 90_000 }, () =>
      closedPipeCase(c, closed),
    )
  }
})

// `npx petstore serve 2>&1 | head -2`, then npx stopped: the server notices that npm is gone and
// says so on stderr (src/cli/npm-launcher.ts) before it drains, and stderr's reader is gone too.
// That write's EPIPE must be dropped, not taken for an uncaught error that ends the drain as a
// failure (exit 1). npm is gone, so the server's exit code cannot be read: its log, on the
// stdout kept open, says how it ended.
test('npx petstore serve: stderr closed, then npx stopped: the notice it cannot write is dropped, the drain is clean (D11)', {
  timeout: 90_000,
}, async () => {
  const dir = await tempDir()
  const c: Case = {
    ...NPX,
    signal: 'SIGTERM',
    to: 'pid',
    exit: { signal: 'SIGTERM' },
    waits: false,
  }
  const started = start(c, serviceEnv(dir.path, join(dir.path, 'signals.db')))
  const launcher = started.child.pid ?? 0
  try {
    const { pid } = await listening(c, started)
    const stderr = started.child.stderr
    assert.ok(stderr !== null)
    const gone = once(stderr, 'close')
    stderr.destroy()
    await gone
    process.kill(launcher, 'SIGTERM')
    await within(
      'the server, its launcher gone, ends',
      once(started.child.stdout ?? started.child, 'end'),
      CLOSED_PIPE_EXIT_MS,
    )
    // Its pipes close as the process exits, a moment before the process table says it has gone.
    await eventually('the server is gone from the process table', () => !running(pid))
    const said = serverLines(started.stdout()).map((line) => line.msg)
    assert.ok(said.includes('shut down cleanly'), started.stdout())
    assert.equal(said.includes('shutting down after an uncaught error'), false, started.stdout())
  } finally {
    try {
      if (launcher > 0) process.kill(-launcher, 'SIGKILL')
    } catch {
      // ESRCH: nothing is left.
    }
    await dir.remove()
  }
})
