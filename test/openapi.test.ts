// The published OpenAPI document: what the server serves is what docs/openapi.json holds, and the
// document says what the interface (its operations and errors) and the error catalog say.
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { after, before, describe, test } from 'node:test'
import { errorCatalog, errorCodes } from '../src/errors.ts'
import { startServer, type TestServer } from './helpers/server.ts'

interface Reference {
  $ref?: string
}

interface Response {
  description: string
  headers?: Record<string, unknown>
  content?: Record<string, { schema?: Reference }>
}

interface Operation {
  operationId?: string
  tags?: string[]
  deprecated?: boolean
  security?: unknown
  requestBody?: { required?: boolean; content?: Record<string, { schema?: Reference }> }
  responses: Record<string, Response>
}

interface Document {
  openapi: string
  servers?: { url: string }[]
  security?: Record<string, string[]>[]
  paths: Record<string, Record<string, Operation>>
  components: {
    schemas: Record<string, { properties?: Record<string, { enum?: string[] }> }>
    securitySchemes?: Record<string, { type: string; scheme?: string }>
  }
}

const ERROR_REF = '#/components/schemas/Error'

let server: TestServer
let served: Document

before(async () => {
  server = await startServer()
  const response = await fetch(`${server.url}/v1/openapi.json`)
  assert.equal(response.status, 200)
  served = (await response.json()) as Document
})

after(async () => {
  await server?.close()
})

/** Every operation of the document with its method and path. */
function operations(document: Document) {
  return Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, operation]) => ({ path, method, operation })),
  )
}

function operation(id: string): Operation {
  const found = operations(served).find(({ operation }) => operation.operationId === id)
  assert.ok(found, `operation ${id} is missing from the document`)
  return found.operation
}

test('the served document equals docs/openapi.json', async () => {
  const file = JSON.parse(
    await readFile(new URL('../docs/openapi.json', import.meta.url), 'utf8'),
  ) as unknown
  assert.deepStrictEqual(served, file, 'docs/openapi.json is stale: run npm run openapi')
})

describe('operations', () => {
  test('are exactly listPets, createPet and getPet, tagged animals, under /v1', () => {
    const found = operations(served).map(({ path, method, operation }) => ({
      path,
      method,
      operationId: operation.operationId,
      tags: operation.tags,
    }))
    assert.deepStrictEqual(found, [
      { path: '/pets', method: 'get', operationId: 'listPets', tags: ['animals'] },
      { path: '/pets', method: 'post', operationId: 'createPet', tags: ['animals'] },
      { path: '/pets/{petId}', method: 'get', operationId: 'getPet', tags: ['animals'] },
    ])
    assert.deepStrictEqual(
      served.servers?.map(({ url }) => url),
      ['/v1'],
    )
  })

  test('all require the bearer credential', () => {
    const bearerAuth = served.components.securitySchemes?.bearerAuth
    assert.equal(bearerAuth?.type, 'http')
    assert.equal(bearerAuth?.scheme, 'bearer')
    assert.deepStrictEqual(served.security, [{ bearerAuth: [] }])
    for (const { operation } of operations(served)) {
      assert.equal(operation.security, undefined, `${operation.operationId} overrides security`)
    }
  })

  test('getPet is deprecated, the others are not', () => {
    assert.equal(operation('getPet').deprecated, true)
    assert.notEqual(operation('listPets').deprecated, true)
    assert.notEqual(operation('createPet').deprecated, true)
  })

  test('createPet requires a NewPet body and its 201 has a Location header and a Pet body', () => {
    const createPet = operation('createPet')
    assert.equal(createPet.requestBody?.required, true)
    assert.equal(
      createPet.requestBody?.content?.['application/json']?.schema?.$ref,
      '#/components/schemas/NewPet',
    )
    const created = createPet.responses['201']
    assert.ok(created, 'createPet has no 201 response')
    assert.ok(created.headers?.Location, 'createPet 201 documents no Location header')
    assert.equal(created.content?.['application/json']?.schema?.$ref, '#/components/schemas/Pet')
  })

  test('the interface’s responses are all there', () => {
    const statuses = (id: string) => Object.keys(operation(id).responses)
    for (const status of ['200', '401']) assert.ok(statuses('listPets').includes(status))
    for (const status of ['201', '400', '401']) assert.ok(statuses('createPet').includes(status))
    for (const status of ['200', '401', '404']) assert.ok(statuses('getPet').includes(status))
  })

  test('401s document the challenge and no rate-limit fields (the key is checked first)', () => {
    for (const { operation } of operations(served)) {
      const headers = Object.keys(operation.responses['401']?.headers ?? {})
      assert.ok(headers.includes('WWW-Authenticate'), `${operation.operationId} 401`)
      assert.ok(!headers.includes('RateLimit'), `${operation.operationId} 401 documents RateLimit`)
      assert.ok(headers.includes('X-Request-Id'), `${operation.operationId} 401`)
    }
  })

  test('every error response references the Error schema', () => {
    let checked = 0
    for (const { operation } of operations(served)) {
      for (const [status, response] of Object.entries(operation.responses)) {
        if (Number(status) < 400) continue
        const types = Object.keys(response.content ?? {})
        assert.deepStrictEqual(
          types,
          ['application/json'],
          `${operation.operationId} ${status}: media types`,
        )
        assert.equal(
          response.content?.['application/json']?.schema?.$ref,
          ERROR_REF,
          `${operation.operationId} ${status} does not reference the Error schema`,
        )
        checked++
      }
    }
    assert.ok(checked >= 6, `only ${checked} error responses`)
  })
})

describe('components', () => {
  test('hold Pet, NewPet, PetStatus, Pets and Error', () => {
    for (const name of ['Pet', 'NewPet', 'PetStatus', 'Pets', 'Error']) {
      assert.ok(served.components.schemas[name], `components.schemas.${name} is missing`)
    }
  })

  test('Error.code lists exactly the codes of src/errors.ts', () => {
    assert.deepStrictEqual(served.components.schemas.Error?.properties?.code?.enum, [...errorCodes])
  })

  test('the README lists exactly these codes, each with its status', async () => {
    const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8')
    const section = readme.slice(readme.indexOf('### Errors'), readme.indexOf('### Limits'))
    const rows = [...section.matchAll(/^\| `([a-z_]+)` +\| (\d{3}) +\|/gm)].map(
      ([, code, status]) => [code, Number(status)],
    )
    assert.deepStrictEqual(
      rows,
      errorCodes.map((code) => [code, errorCatalog[code].status]),
    )
  })
})
