// A client generated from the committed docs/openapi.json, as users of openapi-typescript make
// one (issue 49): the types it gets are type-checked, with the project's TypeScript, against a
// program that compiles only if the headers a response may lack are optional and those always
// sent are present (`// @ts-expect-error` marks each use that must fail; an unused one is an
// error too, so the program fails as soon as a header changes side). The document's side of it
// is in src/contract/components.ts and test/openapi.test.ts.
//
// openapi-typescript is a workspace of its own (scripts/openapi-typescript), with the TypeScript 5
// whose compiler API it is written against; the project's TypeScript 7 has no such API in
// JavaScript, so it type-checks as `npm run typecheck` does, by its `tsc`.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { promisify } from 'node:util'

const run = promisify(execFile)
const DOCUMENT = new URL('../../docs/openapi.json', import.meta.url)
const TSC = fileURLToPath(new URL('../../node_modules/typescript/bin/tsc', import.meta.url))
const GENERATOR_WORKSPACE = fileURLToPath(
  new URL('../../scripts/openapi-typescript/package.json', import.meta.url),
)

interface OpenapiTypescript {
  default: (document: URL) => Promise<unknown>
  astToString: (nodes: unknown) => string
}

/** openapi-typescript's ES module, found from its workspace (it is not the root's). */
async function openapiTypescript(): Promise<OpenapiTypescript> {
  const manifest = createRequire(GENERATOR_WORKSPACE).resolve('openapi-typescript/package.json')
  const module = pathToFileURL(join(dirname(manifest), 'dist/index.mjs'))
  return (await import(module.href)) as OpenapiTypescript
}

/** Uses of the generated types; each `@ts-expect-error` line must fail to compile. */
const PROGRAM = `import type { operations, paths } from './schema.ts'

type Headers<R> = R extends { headers: infer H } ? H : never

declare const listed: Headers<paths['/pets']['get']['responses'][200]>
listed['X-Request-Id'].length
// @ts-expect-error Link: absent on the last page
listed.Link.length
// @ts-expect-error RateLimit: absent when rate limiting is off
listed.RateLimit.length
// @ts-expect-error RateLimit-Policy: absent when rate limiting is off
listed['RateLimit-Policy'].length

declare const created: Headers<paths['/pets']['post']['responses'][201]>
created['X-Request-Id'].length
created.Location.length
// @ts-expect-error Idempotent-Replayed: on a replayed answer only
created['Idempotent-Replayed'].length

declare const inUse: Headers<paths['/pets']['post']['responses'][409]>
const waitInUse: number = inUse['Retry-After']
// @ts-expect-error RateLimit on an error: absent when rate limiting is off
inUse.RateLimit.length

declare const limited: Headers<paths['/pets']['get']['responses'][429]>
const waitLimited: number = limited['Retry-After']
declare const unavailable: Headers<paths['/pets']['get']['responses'][503]>
const waitUnavailable: number = unavailable['Retry-After']
declare const unauthorized: Headers<paths['/pets']['get']['responses'][401]>
unauthorized['WWW-Authenticate'].length
unauthorized['X-Request-Id'].length

declare const pet: Headers<paths['/pets/{petId}']['get']['responses'][200]>
pet.Deprecation.length
pet.Sunset.length
pet.Link.length
declare const gone: Headers<paths['/pets/{petId}']['get']['responses'][410]>
gone.Sunset.length
// @ts-expect-error RateLimit on getPet: absent when rate limiting is off
pet.RateLimit.length

// Request headers: both optional, Prefer on every operation.
const createHeaders: operations['createPet']['parameters']['header'] = {}
const keyed: operations['createPet']['parameters']['header'] = {
  'Idempotency-Key': 'order-42',
  Prefer: 'code=503, delay=300',
}
const listHeaders: operations['listPets']['parameters']['header'] = { Prefer: 'delay=100' }
const getHeaders: operations['getPet']['parameters']['header'] = { Prefer: 'code=404' }

export { createHeaders, getHeaders, keyed, listHeaders, waitInUse, waitLimited, waitUnavailable }
`

const TSCONFIG = {
  compilerOptions: {
    target: 'es2024',
    lib: ['es2024'],
    module: 'nodenext',
    moduleResolution: 'nodenext',
    types: [],
    strict: true,
    noEmit: true,
    allowImportingTsExtensions: true,
    noUnusedLocals: true,
  },
  files: ['check.ts'],
}

test('openapi-typescript’s types of docs/openapi.json: optional headers optional, the rest present', async () => {
  const { default: openapiTS, astToString } = await openapiTypescript()
  const schema = astToString(await openapiTS(DOCUMENT))
  // The shapes the program relies on, so that a failure below is about the headers.
  assert.match(schema, /"X-Request-Id": components\["headers"\]\["RequestId"\];/)
  assert.match(schema, /RateLimit\?: string;/)

  const dir = await mkdtemp(join(tmpdir(), 'petstore-generated-types-'))
  try {
    await writeFile(join(dir, 'package.json'), JSON.stringify({ type: 'module' }))
    await writeFile(join(dir, 'schema.ts'), schema)
    await writeFile(join(dir, 'check.ts'), PROGRAM)
    await writeFile(join(dir, 'tsconfig.json'), JSON.stringify(TSCONFIG))
    const checked = await run(process.execPath, [TSC, '-p', 'tsconfig.json'], {
      cwd: dir,
    }).catch((err: { stdout?: string; stderr?: string }) => {
      assert.fail(`the program does not type-check:\n${err.stdout ?? ''}${err.stderr ?? ''}`)
    })
    assert.equal(checked.stdout, '')
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
})
