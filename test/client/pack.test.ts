// D18: the client as its users get it. `npm pack` in client/ (which builds dist/ with the
// repository's tsc), the tarball installed into a new project, a program there type-checked
// under strict with "nodenext" and a browser module with "bundler", and the program run
// (create, list, get, an error) against a listening service on Node 24 and, where the machine
// has one, its Node 20.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { startServer, type TestServer, tempDir } from '../helpers/server.ts'

const run = promisify(execFile)
const CLIENT = fileURLToPath(new URL('../../client/', import.meta.url))
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
let missing = ''
try {
  await petstore.pets.get(Number.MAX_SAFE_INTEGER)
} catch (err) {
  if (err instanceof PetstoreError) missing = \`\${err.status} \${err.code} \${err.requestId ?? ''}\`
}
console.log(JSON.stringify({ created, listed, paged, one, missing }))
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

async function npm(args: string[], cwd: string): Promise<string> {
  const { stdout } = await run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd,
  })
  return stdout
}

describe('the packed client, installed into a new project', { timeout: 60_000 }, () => {
  let dir: Awaited<ReturnType<typeof tempDir>>
  let project: string
  let server: TestServer
  let packed: string[]

  before(async () => {
    dir = await tempDir()
    const [[pack], started] = await Promise.all([
      npm(['pack', '--json', '--pack-destination', dir.path], CLIENT).then(
        (out) => JSON.parse(out) as { filename: string; files: { path: string }[] }[],
      ),
      startServer(),
    ])
    server = started
    assert.ok(pack)
    packed = pack.files.map((file) => file.path)
    project = join(dir.path, 'project')
    await mkdir(project)
    await writeFile(
      join(project, 'package.json'),
      JSON.stringify({ name: 'uses-petstore-client', private: true, type: 'module' }),
    )
    // Offline: the package has no dependencies, so nothing is fetched.
    await npm(['install', '--offline', join(dir.path, pack.filename)], project)
    await writeFile(join(project, 'main.ts'), PROGRAM)
    await writeFile(join(project, 'browser.ts'), BROWSER_MODULE)
    await writeFile(join(project, 'tsconfig.json'), JSON.stringify(TSCONFIG_NODENEXT))
    await writeFile(join(project, 'tsconfig.bundler.json'), JSON.stringify(TSCONFIG_BUNDLER))
  })
  after(async () => {
    await server?.close()
    await dir?.remove()
  })

  test('holds the build and the README only, with no Node built-in imported', async () => {
    assert.ok(packed.includes('dist/index.js'))
    assert.ok(packed.includes('dist/index.d.ts'))
    assert.ok(packed.includes('README.md'))
    assert.deepEqual(
      packed.filter((path) => !path.startsWith('dist/') && path !== 'README.md'),
      ['package.json'],
    )
    const installed = join(project, 'node_modules', 'petstore-client')
    const manifest = JSON.parse(await readFile(join(installed, 'package.json'), 'utf8'))
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
    })
  }
})
