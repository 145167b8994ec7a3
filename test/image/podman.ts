// Podman as this machine can run it (docs/container.md, D22): root, the vfs storage driver, the
// runc runtime, cgroupfs, explicit ulimits, chroot isolation for builds. docs/container.md's
// commands are written for `docker`; commands.ts turns one into the same command for podman
// here, adding only what this host needs.
import { execFile } from 'node:child_process'

/** Options every podman command needs on this host (crun fails on its cgroups). */
export const GLOBAL = [
  '--storage-driver',
  'vfs',
  '--runtime',
  'runc',
  '--cgroup-manager',
  'cgroupfs',
]

export interface Result {
  code: number
  stdout: string
  stderr: string
}

/** Runs a program to its end; never throws for a non-zero exit (the caller asserts). */
export function run(
  file: string,
  args: readonly string[],
  options: { timeoutMs?: number; input?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<Result> {
  return new Promise((resolve) => {
    const child = execFile(
      file,
      args,
      { maxBuffer: 64 * 1024 * 1024, timeout: options.timeoutMs ?? 600_000, env: options.env },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1
        resolve({ code, stdout: String(stdout), stderr: String(stderr) })
      },
    )
    if (options.input !== undefined) child.stdin?.end(options.input)
  })
}

/** `podman <args>` with this host's global options. */
export function podman(
  args: readonly string[],
  timeoutMs?: number,
  env?: NodeJS.ProcessEnv,
): Promise<Result> {
  return run('podman', [...GLOBAL, ...args], { timeoutMs, env })
}

/** The same, failing with podman's own words when it exits non-zero. */
export async function podmanOk(
  args: readonly string[],
  timeoutMs?: number,
  env?: NodeJS.ProcessEnv,
): Promise<string> {
  const result = await podman(args, timeoutMs, env)
  if (result.code !== 0) {
    throw new Error(`podman ${args.join(' ')} exited ${result.code}:\n${result.stderr}`)
  }
  return result.stdout
}
