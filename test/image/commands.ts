// docs/container.md's container commands (its first sh block), as words, and as the same command
// for podman on this host (test/image/podman.ts runs them). No process is started here, so the
// page's shape is checked inside `npm test` (test/readme-container.test.ts).
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** The host refuses higher limits than these, and podman's defaults are higher. */
const ULIMITS = ['--ulimit', 'nofile=20000:20000', '--ulimit', 'nproc=4096:4096']

/** What this host adds to a command of docs/container.md, by subcommand. */
export function hostOptions(subcommand: string, buildOptions: readonly string[]): string[] {
  if (subcommand === 'build')
    return ['--isolation', 'chroot', '--format', 'docker', ...buildOptions]
  if (subcommand === 'run') return ULIMITS
  return []
}

/** A docs/container.md command (`docker <sub> …`) as podman's arguments after substitution. */
export function podmanArgs(
  command: readonly string[],
  buildOptions: readonly string[] = [],
): string[] {
  const [program, subcommand, ...rest] = command
  if (program !== 'docker' || subcommand === undefined) {
    throw new Error(`not a docker command: ${command.join(' ')}`)
  }
  return [subcommand, ...hostOptions(subcommand, buildOptions), ...rest]
}

/** Splits a shell line of docs/container.md into words: plain words and single or double quotes. */
export function words(line: string): string[] {
  const found = line.match(/'[^']*'|"[^"]*"|[^\s'"]+/g) ?? []
  return found.map((word) => word.replace(/^(['"])(.*)\1$/, '$2'))
}

/**
 * The `docker` commands of docs/container.md, from its first `sh` block: the commands an
 * operator types, in order.
 */
export function readmeContainerCommands(
  page = readFileSync(join(ROOT, 'docs', 'container.md'), 'utf8'),
): string[][] {
  const block = /```sh\n([\s\S]*?)```/.exec(page)?.[1]
  if (block === undefined) throw new Error('docs/container.md has no sh block')
  return block
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => line.startsWith('docker '))
    .map(words)
}
