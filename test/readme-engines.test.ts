// The README's Quick start names the packages `npm ci` warns EBADENGINE about on a system
// Node.js older than 22, and calls those warnings harmless. This keeps that list exact: the
// machine's own npm, on its own Node.js, is asked which packages of the lockfile it would warn
// about (`npm ci --dry-run`, nothing installed or fetched). A dependency that adds a new one
// fails this test, so a warning that matters is never covered by the README's sentence. A scope
// named as `@scope/*` covers its packages, as many as the lockfile holds.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync, realpathSync } from 'node:fs'
import { copyFile, mkdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { tempDir } from './helpers/server.ts'

const run = promisify(execFile)
const ROOT = fileURLToPath(new URL('../', import.meta.url))
/** Debian's Node.js and npm: what a new user runs `npm ci` with. */
const SYSTEM_NODE = '/usr/bin/node'
const SYSTEM_NPM = '/usr/bin/npm'

/** The packages the README's EBADENGINE sentence names, in backticks; none without it. */
async function namedInReadme(): Promise<string[]> {
  const readme = await readFile(join(ROOT, 'README.md'), 'utf8')
  const sentence =
    /On a system Node\.js older than 22, `npm ci` warns `EBADENGINE` for ([^:]+):/.exec(readme)
  if (sentence?.[1] === undefined) return []
  return [...sentence[1].matchAll(/`([^`]+)`/g)].map((match) => match[1] as string).sort()
}

/** `warned` as the README may name them: a scope's packages as `@scope/*` where it says that. */
function asNamed(warned: readonly string[], named: readonly string[]): string[] {
  const scopes = named.filter((name) => name.endsWith('/*')).map((name) => name.slice(0, -1))
  const names = warned.map((name) => {
    const scope = scopes.find((prefix) => name.startsWith(prefix))
    return scope === undefined ? name : `${scope}*`
  })
  return [...new Set(names)].sort()
}

test("the README's harmless EBADENGINE warnings are exactly those npm gives on the system Node.js", async (t) => {
  if (!existsSync(SYSTEM_NODE) || !existsSync(SYSTEM_NPM)) {
    return t.skip(`no system Node.js and npm at ${SYSTEM_NODE}, ${SYSTEM_NPM}`)
  }
  const { stdout: version } = await run(SYSTEM_NODE, ['--version'])
  const major = Number(version.trim().replace(/^v/, '').split('.')[0])
  if (major >= 22) return t.skip(`the system Node.js is ${version.trim()}: npm warns about none`)

  const dir = await tempDir()
  try {
    // The install's inputs only: the manifests of the root and its workspaces, and the lockfile.
    await mkdir(join(dir.path, 'client'))
    await mkdir(join(dir.path, 'scripts/openapi-typescript'), { recursive: true })
    for (const file of [
      'package.json',
      'package-lock.json',
      'client/package.json',
      'scripts/openapi-typescript/package.json',
    ]) {
      await copyFile(join(ROOT, file), join(dir.path, file))
    }
    const { stderr } = await run(
      SYSTEM_NODE,
      // --loglevel=warn: the clone's .npmrc keeps npm to its errors, and `npm test` passes that on.
      [
        realpathSync(SYSTEM_NPM),
        'ci',
        '--dry-run',
        '--ignore-scripts',
        '--no-audit',
        '--no-fund',
        '--loglevel=warn',
      ],
      { cwd: dir.path, env: { ...process.env, npm_config_offline: 'true' } },
    )
    const warned = [...stderr.matchAll(/EBADENGINE {3}package: '(.+)@[^@']+'/g)]
      .map((match) => match[1] as string)
      .sort()
    assert.deepEqual(await namedInReadme(), asNamed(warned, await namedInReadme()))
  } finally {
    await dir.remove()
  }
})

test("npx petstore on the system Node.js says nothing of npm's: the command runs on the project's", async (t) => {
  const npx = join(SYSTEM_NPM, '..', 'npx')
  if (!existsSync(SYSTEM_NODE) || !existsSync(npx)) {
    return t.skip(`no system Node.js and npx at ${SYSTEM_NODE}, ${npx}`)
  }
  // Without the npm_config_ variables an `npm test` run exports: as a person's shell runs it.
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith('npm_')),
  )
  const { stdout, stderr } = await run(SYSTEM_NODE, [realpathSync(npx), 'petstore', '--version'], {
    cwd: ROOT,
    env: { ...env, npm_config_offline: 'true' },
  })
  assert.match(stdout, /^petstore \d+\.\d+\.\d+\n$/)
  assert.equal(stderr, '')
})
