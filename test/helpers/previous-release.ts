// D27: the previous release (test/upgrade/previous-release names its commit), taken from this
// repository's history into a folder of its own, ready to run as an operator would run it.
import { execFileSync, spawnSync } from 'node:child_process'
import { readFileSync, symlinkSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

export interface PreviousRelease {
  commit: string
  version: string
  /** Its bin/petstore.js. */
  bin: string
  remove(): Promise<void>
}

/** The commit and version the file names: its one line that is not a comment. */
export function previousReleaseNamed(): { commit: string; version: string } {
  const text = readFileSync(join(ROOT, 'test/upgrade/previous-release'), 'utf8')
  const line = text.split('\n').find((entry) => entry.trim() !== '' && !entry.startsWith('#'))
  const [commit, version] = line?.trim().split(/\s+/) ?? []
  if (commit === undefined || version === undefined || !/^[0-9a-f]{40}$/.test(commit)) {
    throw new Error('test/upgrade/previous-release names no commit and version')
  }
  return { commit, version }
}

/** Why the previous release cannot be had here (no git, or a history without its commit). */
export function previousReleaseSkipReason(): string | undefined {
  const { commit } = previousReleaseNamed()
  const found = spawnSync('git', ['-C', ROOT, 'cat-file', '-e', `${commit}^{commit}`])
  if (found.error !== undefined) return 'git is not installed'
  if (found.status !== 0) return `the previous release ${commit} is not in this checkout's history`
  return undefined
}

/**
 * The previous release's files (git archive), with its runtime dependencies: this checkout's
 * node_modules when both releases name the same ones, else its own `npm ci --omit=dev`.
 */
export async function previousRelease(): Promise<PreviousRelease> {
  const { commit, version } = previousReleaseNamed()
  const dir = await mkdtemp(join(tmpdir(), 'petstore-previous-'))
  const archive = execFileSync('git', ['-C', ROOT, 'archive', '--format=tar', commit], {
    maxBuffer: 256 * 1024 * 1024,
  })
  execFileSync('tar', ['-x', '-C', dir], { input: archive })
  if (runtimeDependencies(dir) === runtimeDependencies(ROOT)) {
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir')
  } else {
    execFileSync('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund'], {
      cwd: dir,
      stdio: 'ignore',
    })
  }
  return {
    commit,
    version,
    bin: join(dir, 'bin/petstore.js'),
    remove: () => rm(dir, { recursive: true, force: true }),
  }
}

function runtimeDependencies(dir: string): string {
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>
  }
  return JSON.stringify(manifest.dependencies ?? {})
}
