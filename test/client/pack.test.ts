// D18: the client as its users get it. `npm publish --dry-run` in client/ passes and shows what
// a publish would upload; the tarball is then made and installed into a new project by the
// commands of client/README.md's Install section, run as written (its placeholders replaced),
// so the README and this test cannot drift apart. A program there is type-checked under strict
// with "nodenext" and a browser module with "bundler", and run (create, list, get, an error)
// against a listening service on the Node.js running the suite and, where the machine has one, its Node 20.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { startServer, type TestServer, tempDir } from '../helpers/server.ts'

const run = promisify(execFile)
const ROOT = resolve(fileURLToPath(new URL('../../', import.meta.url)))
const CLIENT = join(ROOT, 'client')
/** What client/README.md's install commands write for the clone and for the user's project. */
const CLONE_PLACEHOLDER = '/path/to/petstore'
const PROJECT_PLACEHOLDER = '/path/to/your-project'
/**
 * Given to npm through its environment, so that the README's commands run as written: the
 * package has no dependencies, so an install fetches nothing, and audit and funding would only
 * ask the registry.
 */
const NPM_OFFLINE = {
  npm_config_offline: 'true',
  npm_config_audit: 'false',
  npm_config_fund: 'false',
  npm_config_loglevel: 'error',
}
const TSC = fileURLToPath(new URL('../../node_modules/typescript/bin/tsc', import.meta.url))
const TYPES = fileURLToPath(new URL('../../node_modules/@types', import.meta.url))
/** Debian's Node.js: the oldest the package supports (engines: >=20). */
const SYSTEM_NODE = '/usr/bin/node'

const PROGRAM = `import { type NewPet, type Pet, type PetStatus, Petstore, PetstoreError } from 'petstore-client'

const petstore = new Petstore({
  baseUrl: process.env.PETSTORE_URL ?? '',
  apiKey: process.env.PETSTORE_API_KEY,
})
const status: PetStatus = 'pending'
const newPet: NewPet = { name: \`Packed on \${process.version}\`, categoryId: 5, status }
const created: Pet = await petstore.pets.create(newPet)
const listed: number[] = []
for await (const pet of petstore.pets.list({ status, limit: 1 })) listed.push(pet.id)
const one = await petstore.pets.get(created.id)
let cursor: string | undefined
const paged: number[] = []
do {
  const page = await petstore.pets.listPage({ status, limit: 1, cursor })
  paged.push(...page.pets.map((pet) => pet.id))
  cursor = page.nextCursor
} while (cursor !== undefined)
// A production service ignores Prefer: the 503 a staging one would rehearse is not answered.
const preferred = await petstore.pets.listPage({ status, limit: 1 }, { prefer: 'code=503' })
let missing = ''
try {
  await petstore.pets.get(Number.MAX_SAFE_INTEGER)
} catch (err) {
  if (err instanceof PetstoreError) missing = \`\${err.status} \${err.code} \${err.requestId ?? ''}\`
}
console.log(JSON.stringify({ created, listed, paged, one, missing, preferred: preferred.pets.length }))
`

const BROWSER_MODULE = `import { type Pet, Petstore, PetstoreError } from 'petstore-client'

const petstore = new Petstore({
  baseUrl: \`\${location.origin}/v1\`,
  apiKey: sessionStorage.getItem('petstore-key') ?? undefined,
})

export async function availableNames(signal: AbortSignal): Promise<string[]> {
  const names: string[] = []
  try {
    for await (const pet of petstore.pets.list({ status: 'available' }, { signal })) names.push(pet.name)
  } catch (err) {
    if (err instanceof PetstoreError && err.rateLimit) return [\`retry in \${err.rateLimit.reset} s\`]
    throw err
  }
  return names
}

export const first = (page: { pets: Pet[]; nextCursor?: string }) => page.pets[0]?.name
`

/** As strict as a user's project may be: the package's declarations must pass too. */
const STRICT = {
  strict: true,
  exactOptionalPropertyTypes: true,
  noUncheckedIndexedAccess: true,
  target: 'es2022',
  skipLibCheck: false,
}

const TSCONFIG_NODENEXT = {
  compilerOptions: {
    ...STRICT,
    module: 'nodenext',
    moduleResolution: 'nodenext',
    lib: ['es2022'],
    types: ['node'],
    typeRoots: [TYPES],
    outDir: 'out',
  },
  files: ['main.ts'],
}

const TSCONFIG_BUNDLER = {
  compilerOptions: {
    ...STRICT,
    module: 'esnext',
    moduleResolution: 'bundler',
    lib: ['es2022', 'dom'],
    types: [],
    noEmit: true,
  },
  files: ['browser.ts'],
}

/** The first `lang` code block in `heading`'s section of `markdown`, as written. */
function codeBlock(markdown: string, heading: string, lang: string): string {
  const start = markdown.indexOf(`\n${heading}\n`)
  assert.ok(start >= 0, `a "${heading}" section`)
  const end = markdown.indexOf('\n## ', start + 1)
  const section = markdown.slice(start, end < 0 ? undefined : end)
  const block = new RegExp(`\`\`\`${lang}\n([\\s\\S]*?)\`\`\``).exec(section)?.[1]
  assert.ok(block, `a ${lang} block in "${heading}"`)
  return block
}

/** The commands of the first `sh` block in `heading`'s section, comments and blank lines left out. */
function shellCommands(markdown: string, heading: string): string[] {
  const start = markdown.indexOf(`\n${heading}\n`)
  assert.ok(start >= 0, `a "${heading}" section`)
  const end = markdown.indexOf('\n## ', start + 1)
  const section = markdown.slice(start, end < 0 ? undefined : end)
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1]
  assert.ok(block, `a sh block in "${heading}"`)
  return block
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
}

/**
 * Runs install commands as a user types them: `cd` changes the folder the next ones run in,
 * every other one is npm's. The placeholders become this checkout and `project`.
 */
async function runAsWritten(commands: string[], project: string): Promise<void> {
  const place = (word: string) =>
    word.replaceAll(CLONE_PLACEHOLDER, ROOT).replaceAll(PROJECT_PLACEHOLDER, project)
  let cwd = ROOT
  for (const command of commands) {
    const [program, ...args] = command.split(/\s+/).map(place)
    if (program === 'cd' && args.length === 1 && args[0] !== undefined) {
      cwd = resolve(cwd, args[0])
      continue
    }
    assert.equal(program, 'npm', `"${command}": the test runs cd and npm commands only`)
    if (args.length === 1 && args[0] === 'ci') {
      // This checkout is one `npm ci` installed (the test runs on its TypeScript and Node), and
      // running it again would replace the node_modules the other tests are using. .ci/run runs
      // it on its fresh clone before the tests.
      assert.equal(cwd, ROOT, '`npm ci` is run in the clone')
      continue
    }
    await run('npm', args, { cwd, env: { ...process.env, ...NPM_OFFLINE } })
  }
}

/** The fields of a package.json the test reads. */
interface Manifest {
  name: string
  version: string
  license?: string
  private?: boolean
  types?: string
  exports?: Record<string, { types?: string; default?: string }>
  dependencies?: Record<string, string>
}

async function manifestOf(folder: string): Promise<Manifest> {
  return JSON.parse(await readFile(join(folder, 'package.json'), 'utf8')) as Manifest
}

interface DryRun {
  name: string
  version: string
  filename: string
  integrity: string
  files: { path: string }[]
}

/**
 * `npm publish --dry-run` in client/, as a publisher runs it (its prepack builds dist/). Offline:
 * the only thing it would ask the registry is whether this version is out already, and it
 * uploads nothing, so no login is needed either.
 */
async function publishDryRun(): Promise<DryRun> {
  const { stdout } = await run('npm', ['publish', '--dry-run', '--json', '--offline'], {
    cwd: CLIENT,
    env: { ...process.env, ...NPM_OFFLINE },
  })
  // Keyed by the package's name; the build's own lines may come before the JSON.
  const report = JSON.parse(stdout.slice(stdout.indexOf('{'))) as Record<string, DryRun>
  const published = report['petstore-client']
  assert.ok(published, `the dry run publishes petstore-client: ${Object.keys(report).join(', ')}`)
  return published
}

describe('the packed client, installed into a new project', { timeout: 60_000 }, () => {
  let dir: Awaited<ReturnType<typeof tempDir>>
  let project: string
  let server: TestServer
  let published: DryRun
  let packed: string[]
  let clientReadme: string
  let installCommands: string[]

  before(async () => {
    dir = await tempDir()
    project = join(dir.path, 'project')
    await mkdir(project)
    // A user's project: its own package.json, ESM, nothing installed yet.
    await writeFile(
      join(project, 'package.json'),
      JSON.stringify({ name: 'uses-petstore-client', private: true, type: 'module' }),
    )
    clientReadme = await readFile(join(CLIENT, 'README.md'), 'utf8')
    installCommands = shellCommands(clientReadme, '## Install')
    const [built, started] = await Promise.allSettled([
      // One after the other: both build client/dist/ afresh.
      publishDryRun().then(async (result) => {
        await runAsWritten(installCommands, project)
        return result
      }),
      startServer(),
    ])
    // Settled both ways before failing, so that `after` closes a server started beside a failed
    // build instead of leaving it listening (the test process would never end).
    if (started.status === 'fulfilled') server = started.value
    if (built.status === 'rejected') throw built.reason
    if (started.status === 'rejected') throw started.reason
    published = built.value
    packed = published.files.map((file) => file.path)
    await writeFile(join(project, 'main.ts'), PROGRAM)
    await writeFile(join(project, 'browser.ts'), BROWSER_MODULE)
    await writeFile(join(project, 'tsconfig.json'), JSON.stringify(TSCONFIG_NODENEXT))
    await writeFile(join(project, 'tsconfig.bundler.json'), JSON.stringify(TSCONFIG_BUNDLER))
  })
  after(async () => {
    await server?.close()
    await dir?.remove()
  })

  test('publishes (dry run) the build, the README and the license, and nothing else', async () => {
    const manifest = await manifestOf(CLIENT)
    assert.equal(published.name, 'petstore-client')
    assert.equal(published.version, manifest.version)
    assert.equal(manifest.license, 'MIT')
    assert.equal(manifest.private, undefined, 'a private package cannot be published')
    assert.match(await readFile(join(CLIENT, 'LICENSE'), 'utf8'), /^MIT License\n/)
    for (const path of ['dist/index.js', 'dist/index.d.ts', 'README.md', 'LICENSE']) {
      assert.ok(packed.includes(path), `${path} is published`)
    }
    assert.deepEqual(
      packed.filter((path) => !path.startsWith('dist/') && path !== 'README.md'),
      ['LICENSE', 'package.json'],
    )
    assert.deepEqual(
      packed.filter((path) => path.startsWith('dist/') && !/\.(d\.ts|js)$/.test(path)),
      [],
      'no sources, tests or maps in dist/',
    )
    // Every entry point a resolver may take is in the tarball.
    assert.deepEqual(Object.keys(manifest.exports ?? {}), ['.'])
    const root = manifest.exports?.['.']
    for (const target of [manifest.types, root?.types, root?.default]) {
      assert.ok(
        typeof target === 'string' && target.startsWith('./'),
        `an entry point in the package: ${target}`,
      )
      assert.ok(packed.includes(target.slice(2)), `${target} is in the tarball`)
    }
  })

  test('installs as client/README.md says: the tarball that would be published, by path', async () => {
    const manifest = await manifestOf(join(project, 'node_modules', 'petstore-client'))
    assert.equal(manifest.name, 'petstore-client')
    assert.equal(manifest.version, published.version)
    // The dependency the README says the project gets, on the very tarball the dry run made.
    const spec = (await manifestOf(project)).dependencies?.['petstore-client']
    assert.equal(spec, `file:${published.filename}`)
    assert.ok(clientReadme.includes(`\`${spec}\``), `client/README.md names ${spec}`)
    const lock = JSON.parse(await readFile(join(project, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { integrity?: string }>
    }
    assert.equal(lock.packages['node_modules/petstore-client']?.integrity, published.integrity)
    // The registry line is the one for once it is published, not part of the install that works.
    assert.ok(
      !installCommands.some((command) => /^npm (install|i) petstore-client\b/.test(command)),
    )
    // The main README's short form is the same commands, run from the clone.
    const readme = await readFile(join(ROOT, 'README.md'), 'utf8')
    for (const command of shellCommands(readme, '## Client SDK').flatMap((line) =>
      line.split(' && '),
    )) {
      assert.ok(installCommands.includes(command), `README.md's "${command}" is client/README.md's`)
    }
  })

  test('holds no Node built-in import and no runtime dependency', async () => {
    const installed = join(project, 'node_modules', 'petstore-client')
    const manifest = await manifestOf(installed)
    assert.equal(manifest.dependencies, undefined, 'zero runtime dependencies')
    for (const path of packed.filter((p) => p.endsWith('.js'))) {
      const source = await readFile(join(installed, path), 'utf8')
      assert.doesNotMatch(source, /\bfrom ['"]node:|\brequire\(|\bprocess\.|\bBuffer\b/, path)
    }
  })

  test('type-checks under strict with "nodenext" and with "bundler"', async () => {
    await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: project })
    await run(process.execPath, [TSC, '-p', 'tsconfig.bundler.json'], { cwd: project })
  })

  const nodes = [process.execPath, ...(existsSync(SYSTEM_NODE) ? [SYSTEM_NODE] : [])]
  // The main README's example as written, as `example.mjs` on every Node.js the package supports
  // and as `example.mts` on this one, which strips its types; both in a folder whose package.json
  // says nothing of ES modules, as a new `npm init -y` project's says nothing.
  const examples = [
    ...nodes.map((node) => ({ node, file: 'example.mjs' })),
    { node: process.execPath, file: 'example.mts' },
  ]
  for (const { node, file } of examples) {
    test(`README's example runs as written: ${file} on ${node}`, async () => {
      const readme = await readFile(join(ROOT, 'README.md'), 'utf8')
      const fresh = join(project, 'fresh')
      await mkdir(fresh, { recursive: true })
      await writeFile(
        join(fresh, 'package.json'),
        JSON.stringify({ name: 'fresh', version: '1.0.0' }),
      )
      // Inside the project: `petstore-client` resolves from its node_modules.
      await writeFile(join(fresh, file), codeBlock(readme, '## Client SDK', 'js'))
      const { stdout } = await run(node, [file], {
        cwd: fresh,
        env: { PETSTORE_URL: `${server.url}/v1`, PETSTORE_API_KEY: server.key },
      })
      const created = /^created (\d+) Rex$/m.exec(stdout)
      assert.ok(created, stdout)
      assert.match(stdout, new RegExp(`^${created[1]} Rex$`, 'm'), 'listed, every page')
    })
  }

  for (const node of nodes) {
    test(`runs: create, list, get and an error, on ${node}`, async () => {
      if (!existsSync(join(project, 'out', 'main.js'))) {
        await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: project })
      }
      const { stdout: version } = await run(node, ['--version'])
      const { stdout } = await run(node, ['out/main.js'], {
        cwd: project,
        env: { PETSTORE_URL: `${server.url}/v1`, PETSTORE_API_KEY: server.key },
      })
      const result = JSON.parse(stdout)
      assert.equal(result.created.name, `Packed on ${version.trim()}`)
      assert.deepEqual(result.one, result.created)
      assert.ok(result.listed.includes(result.created.id))
      assert.deepEqual(result.paged, result.listed)
      assert.equal(new Set(result.listed).size, result.listed.length)
      assert.match(result.missing, /^404 not_found \S+$/)
      assert.equal(result.preferred, 1, 'prefer is in the published types; production ignores it')
    })
  }
})
