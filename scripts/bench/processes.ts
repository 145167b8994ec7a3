// The benchmark's processes: the servers under test (pinned to one core where taskset exists),
// and what the harness reads of them (readiness, resident memory).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, readFileSync } from 'node:fs'
import { freePort } from '../../test/helpers/free-port.ts'

export const TASKSET = '/usr/bin/taskset'

/** Cores: servers on the first, the load generator on the second (when there are two). */
export const pinning = existsSync(TASKSET) ? { server: '0', load: '1' } : undefined

/** Pins this process (all its threads) to the load generator's core. */
export function pinSelf(): void {
  if (pinning) execFileSync(TASKSET, ['-a', '-cp', pinning.load, String(process.pid)])
}

export interface ServerProcess {
  name: string
  url: string
  pid: number
  child: ChildProcess
  stop(): Promise<void>
}

/**
 * Starts `node <args>` pinned to the server core, and waits until `readyPath` answers. `node` is
 * the Node.js running the harness unless another binary is given (e.g. the maintenance line's).
 */
export async function startServer(
  name: string,
  nodeArgs: string[],
  env: Record<string, string>,
  readyPath: string,
  node = process.execPath,
): Promise<ServerProcess> {
  const port = await freePort()
  const command = [node, ...nodeArgs]
  const [file, ...args] = pinning ? [TASKSET, '-c', pinning.server, ...command] : command
  const child = spawn(file as string, args, {
    env: { PATH: process.env.PATH ?? '', ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let stderr = ''
  child.stderr?.on('data', (chunk) => {
    stderr += chunk
  })
  const exited = once(child, 'exit')
  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 60_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited before it was ready:\n${stderr}`)
    try {
      const response = await fetch(url + readyPath)
      await response.body?.cancel()
      if (response.status < 500) break
    } catch {}
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`${name} was not ready within 60 s:\n${stderr}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  // taskset execs node in place, so the child's pid is the server's.
  const pid = child.pid ?? 0
  return {
    name,
    url,
    pid,
    child,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
      await exited
      clearTimeout(timer)
    },
  }
}

/** Samples a process's resident set size (VmRSS) every 100 ms; `stop` returns the peak in MB. */
export function sampleRss(pid: number): { stop(): number } {
  let peakKb = 0
  const read = () => {
    try {
      const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1])
      if (kb > peakKb) peakKb = kb
    } catch {}
  }
  read()
  const timer = setInterval(read, 100)
  return {
    stop() {
      clearInterval(timer)
      read()
      return peakKb / 1024
    },
  }
}

/** CPU time (user + system) a process has used so far, in seconds (Linux clock ticks: 1/100 s). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // Fields after the command name, which is in parentheses and may contain spaces.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

/** CPU time the whole machine has spent busy, and stolen by the hypervisor, in seconds. */
export function machineCpuSeconds(): { busy: number; steal: number } {
  const fields = (/^cpu\s+(.+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1] ?? '')
    .split(/\s+/)
    .map(Number)
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = fields
  return { busy: (user + nice + system + irq + softirq) / 100, steal: steal / 100 }
}

/**
 * One core's time from /proc/stat in clock ticks: busy (user, nice, system, irq, softirq, steal)
 * and in all (busy, idle and iowait). Two readings give the share of the core that was busy.
 */
export function coreTicks(core: string): { busy: number; total: number } {
  const line = new RegExp(`^cpu${core}\\s+(.+)$`, 'm').exec(readFileSync('/proc/stat', 'utf8'))
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = (
    line?.[1] ?? ''
  )
    .split(/\s+/)
    .map(Number)
  const busy = user + nice + system + irq + softirq + steal
  return { busy, total: busy + idle + iowait }
}
