// Runs the real `petstore` command as a child process, the way an operator would.
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'

export const BIN = fileURLToPath(new URL('../../bin/petstore.js', import.meta.url))

/**
 * What a child inherits besides the environment a test gives it: PATH, and Node's compile cache
 * when `npm test` set one (NODE_COMPILE_CACHE), so that each child need not strip and compile
 * the service's modules again.
 */
export function inheritedEnv(): Record<string, string> {
  const cache = process.env.NODE_COMPILE_CACHE
  return {
    PATH: process.env.PATH ?? '',
    ...(cache ? { NODE_COMPILE_CACHE: cache } : {}),
    // Load shedding (D16) is off unless a test asks: test runs share the cores, and a service
    // that sheds because the machine is busy with other test files fails tests not about it.
    PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '0',
  }
}

export interface CommandResult {
  code: number | null
  stdout: string
  stderr: string
}

/**
 * Runs `petstore ...args` to completion with the given environment (added to a clean one).
 * `stdin`, when given, is written and the pipe left open, as a user's pipe may be: a command must
 * read what it needs, not wait for the end (one that waited is killed after 20 s, and fails).
 */
export async function runCli(
  args: string[],
  env: Record<string, string>,
  options: { stdin?: string; bin?: string } = {},
): Promise<CommandResult> {
  const child = spawn(process.execPath, [options.bin ?? BIN, ...args], {
    env: { ...inheritedEnv(), ...env },
    stdio: [options.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout?.on('data', (chunk) => {
    stdout += chunk
  })
  child.stderr?.on('data', (chunk) => {
    stderr += chunk
  })
  const guard = setTimeout(() => child.kill('SIGKILL'), 20_000)
  if (options.stdin !== undefined) {
    child.stdin?.on('error', () => {})
    child.stdin?.write(options.stdin)
  }
  const [code] = await once(child, 'close')
  clearTimeout(guard)
  child.stdin?.destroy()
  return { code, stdout, stderr }
}

export interface ServiceProcess {
  url: string
  child: ChildProcess
  stdout(): string
  stderr(): string
  /** Resolves with the exit code once the process has exited. */
  exited: Promise<number | null>
  stop(signal?: NodeJS.Signals): Promise<number | null>
}

/**
 * Starts `petstore serve ...args` on a free port and resolves once it listens (read from its
 * info-level "Server listening" log line, so LOG_LEVEL is info whatever `env` says).
 */
export async function startService(
  env: Record<string, string>,
  args: string[] = [],
  { bin = BIN }: { bin?: string } = {},
): Promise<ServiceProcess> {
  const child = spawn(process.execPath, [bin, 'serve', ...args], {
    // Metrics (D17) are off unless a test asks: parallel services would share port 9464.
    env: {
      ...inheritedEnv(),
      PORT: '0',
      HOST: '127.0.0.1',
      METRICS_PORT: 'off',
      ...env,
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stderr.on('data', (chunk) => {
    stderr += chunk
  })
  const exited = once(child, 'exit').then(([code]) => code as number | null)
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`service did not start:\n${stderr}`))
    }, 20_000)
    child.stdout.on('data', (chunk) => {
      stdout += chunk
      const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout)
      if (match?.[1]) {
        clearTimeout(timer)
        resolve(match[1])
      }
    })
    exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`service exited with ${code} before listening:\n${stderr}`))
    })
  })
  return {
    url,
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      return exited
    },
  }
}

/**
 * Resolves once `read()` matches `pattern`, or fails showing what was read. What a start says
 * after "Server listening" (the first key, or that none was made; D3) is written a moment later,
 * each log line as it is logged (D11), so a test waits for it rather than expecting it with the
 * listening line.
 */
export async function waitForOutput(
  read: () => string,
  pattern: RegExp,
  ms = 10_000,
): Promise<void> {
  const deadline = Date.now() + ms
  while (!pattern.test(read())) {
    if (Date.now() > deadline) throw new Error(`no ${pattern} in:\n${read()}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/**
 * Runs `petstore ...args` with a terminal for its streams, as someone typing `npm start` has
 * (util-linux's `script` gives it a pseudo-terminal), where the first start shows its key (D3).
 * What it writes to stdout and stderr is one stream, its lines ending in \r\n.
 */
export function spawnOnTerminal(
  args: string[],
  env: Record<string, string>,
): { child: ChildProcess; output(): string; exited: Promise<number | null> } {
  const command = `exec ${[process.execPath, BIN, ...args].map((arg) => `'${arg}'`).join(' ')}`
  const child = spawn(
    'script',
    ['--quiet', '--flush', '--return', '--command', command, '/dev/null'],
    {
      env: { ...inheritedEnv(), METRICS_PORT: 'off', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  let output = ''
  child.stdout.on('data', (chunk) => {
    output += chunk
  })
  const exited = once(child, 'exit').then(([code]) => code as number | null)
  return { child, output: () => output, exited }
}

export interface TerminalService {
  url: string
  output(): string
  stop(): Promise<number | null>
}

/** `petstore serve` on a terminal (spawnOnTerminal), resolved once it listens. */
export async function startServiceOnTerminal(
  env: Record<string, string>,
  args: string[] = [],
): Promise<TerminalService> {
  const { child, output, exited } = spawnOnTerminal(['serve', ...args], {
    PORT: '0',
    HOST: '127.0.0.1',
    ...env,
    LOG_LEVEL: 'info',
  })
  const listening = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`service did not start:\n${output()}`))
    }, 20_000)
    child.stdout?.on('data', () => {
      const found = listening.exec(output())?.[1]
      if (found !== undefined) {
        clearTimeout(timer)
        resolve(found)
      }
    })
    exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`service exited with ${code} before listening:\n${output()}`))
    })
  })
  return {
    url,
    output,
    // `script` answers SIGTERM by killing what it runs; the service's own pid (in every log
    // line) gets the signal instead, for a graceful stop whose exit code `script` returns.
    async stop() {
      const pid = Number(/"pid":(\d+)/.exec(output())?.[1])
      if (child.exitCode === null) process.kill(pid, 'SIGTERM')
      return exited
    },
  }
}
