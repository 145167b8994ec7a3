// The published OpenAPI document: what the server serves is what docs/openapi.json holds, and the
// document says what the interface (its operations and errors) and the error catalog say.
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { after, before, describe, test } from 'node:test'
import { Ajv } from 'ajv'
import { GetPetParams, ListPetsQuery, sharedSchemas } from '../src/contract/schemas.ts'
import { type ErrorCode, errorBody, errorCatalog, errorCodes } from '../src/errors.ts'
import { CreatePetHeaders } from '../src/http/routes/pets.ts'
import { validatorCompiler } from '../src/http/validation.ts'
import { createPet, startServer, type TestServer } from './helpers/server.ts'

interface Reference {
  $ref?: string
}

interface Example {
  summary?: string
  value: unknown
}

interface Response {
  description: string
  headers?: Record<string, Reference>
  content?: Record<string, { schema?: Reference; examples?: Record<string, Reference> }>
}

interface Operation {
  operationId?: string
  tags?: string[]
  deprecated?: boolean
  security?: unknown
  requestBody?: { required?: boolean; content?: Record<string, { schema?: Reference }> }
  parameters?: Reference[]
  responses: Record<string, Response | Reference>
}

interface Document {
  openapi: string
  info: { version: string }
  servers?: { url: string; variables?: Record<string, { default: string }> }[]
  security?: Record<string, string[]>[]
  paths: Record<string, Record<string, Operation>>
  components: {
    schemas: Record<
      string,
      { properties?: Record<string, { enum?: string[] }>; examples?: unknown[] }
    >
    securitySchemes?: Record<string, { type: string; scheme?: string }>
    headers: Record<string, { description: string; schema: { type: string }; example: unknown }>
    examples: Record<string, Example>
    responses: Record<string, Response>
    parameters?: Record<string, { in: string; required: boolean; description: string }>
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

/** The object a `#/components/<kind>/<name>` reference names; throws when there is none. */
function resolve<T>(reference: Reference | T, kind: 'headers' | 'examples' | 'responses'): T {
  const pointer = (reference as Reference).$ref
  if (pointer === undefined) return reference as T
  const prefix = `#/components/${kind}/`
  assert.ok(pointer.startsWith(prefix), `${pointer} is not under ${prefix}`)
  const target = (served.components[kind] as Record<string, unknown>)[pointer.slice(prefix.length)]
  assert.ok(target, `${pointer} names nothing`)
  return target as T
}

function response(operation: Operation, status: string): Response | undefined {
  const found = operation.responses[status]
  return found === undefined ? undefined : resolve<Response>(found, 'responses')
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

test("info.version is the release: package.json's version", async () => {
  const manifest = JSON.parse(
    await readFile(new URL('../package.json', import.meta.url), 'utf8'),
  ) as { version: string }
  // test/cli.test.ts checks that petstore --version prints the same.
  assert.equal(served.info.version, manifest.version)
})

test("a real answer's RateLimit fields and next link have the documented form, and its cursor works as documented", async () => {
  const limited = await startServer({ rateLimit: 600 })
  try {
    for (const name of ['One', 'Two']) await createPet(limited, { name, categoryId: 1 })
    const list = operation('listPets')
    const ok = response(list, '200')
    const pattern = (name: string) => {
      const header = resolve<{ schema: { pattern?: string } }>(ok?.headers?.[name] ?? {}, 'headers')
      assert.ok(header.schema.pattern, `${name} has a pattern`)
      return new RegExp(header.schema.pattern)
    }
    const page = await limited.request('/v1/pets?limit=1')
    assert.match(page.headers.get('ratelimit') ?? '', pattern('RateLimit'))
    assert.match(page.headers.get('ratelimit-policy') ?? '', pattern('RateLimit-Policy'))
    const link = page.headers.get('link') ?? ''
    assert.match(link, pattern('Link'))
    // The cursor the link carries, sent with the same limit, is the link's page.
    const next = new URL(/^<([^>]+)>/.exec(link)?.[1] ?? '', page.url)
    const cursor = next.searchParams.get('cursor') ?? ''
    const byLink = await limited.request(`${next.pathname}${next.search}`)
    const byCursor = await limited.request(`/v1/pets?limit=1&cursor=${cursor}`)
    assert.deepEqual(await byCursor.json(), await byLink.json())
    // The documented example is a cursor the service takes.
    const parameter = (list.parameters ?? []).find(
      (p) => (p as { name?: string }).name === 'cursor',
    )
    const example = (parameter as { example?: string } | undefined)?.example
    assert.equal((await limited.request(`/v1/pets?cursor=${example}`)).status, 200)
  } finally {
    await limited.close()
  }
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
  })

  test('servers: this deployment first, then production and staging by their base addresses', () => {
    // servers[0] is what /docs's "Try it out" and most generated clients use (D1).
    assert.deepStrictEqual(
      served.servers?.map(({ url, variables }) => [url, variables?.[url.slice(1, -1)]?.default]),
      [
        ['/v1', undefined],
        ['{base_url}', 'https://petstore.example.net/v1'],
        ['{staging_base_url}', 'https://staging.petstore.example.net/v1'],
      ],
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

  test('each refers to the staging-only Prefer header parameter, written once under components', () => {
    for (const { operation } of operations(served)) {
      assert.ok(
        operation.parameters?.some(({ $ref }) => $ref === '#/components/parameters/Prefer'),
        `${operation.operationId} does not refer to Prefer`,
      )
    }
    const prefer = served.components.parameters?.Prefer
    assert.equal(prefer?.in, 'header')
    assert.equal(prefer?.required, false)
    assert.match(prefer?.description ?? '', /staging only/)
    assert.match(prefer?.description ?? '', /Preference-Applied/)
  })

  test('Prefer is documented, not validated: production answers as if it were not there', async () => {
    // The parameter is added to the document only (src/contract/prefer.ts), so no route gains a
    // validation step for it, and production ignores it.
    for (const path of ['/v1/pets', '/v1/pets/1', '/v1/pets?limit=1']) {
      const response = await server.request(path, { headers: { prefer: 'code=oops, delay=-1' } })
      await response.body?.cancel()
      assert.ok(response.status === 200 || response.status === 404, `${path}: ${response.status}`)
      assert.equal(response.headers.get('preference-applied'), null, path)
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
    const created = response(createPet, '201')
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
      const headers = Object.keys(response(operation, '401')?.headers ?? {})
      assert.ok(headers.includes('WWW-Authenticate'), `${operation.operationId} 401`)
      assert.ok(!headers.includes('RateLimit'), `${operation.operationId} 401 documents RateLimit`)
      assert.ok(headers.includes('X-Request-Id'), `${operation.operationId} 401`)
    }
  })

  test('every error response references the Error schema', () => {
    let checked = 0
    for (const { operation } of operations(served)) {
      for (const status of Object.keys(operation.responses)) {
        if (Number(status) < 400) continue
        const answer = response(operation, status)
        const types = Object.keys(answer?.content ?? {})
        assert.deepStrictEqual(
          types,
          ['application/json'],
          `${operation.operationId} ${status}: media types`,
        )
        assert.equal(
          answer?.content?.['application/json']?.schema?.$ref,
          ERROR_REF,
          `${operation.operationId} ${status} does not reference the Error schema`,
        )
        checked++
      }
    }
    assert.ok(checked >= 6, `only ${checked} error responses`)
  })
})

describe('examples and references', () => {
  test('a header always sent is a required reference; an optional one is written out, not required', () => {
    // openapi-typescript types every $ref'd header as present (src/contract/components.ts), so
    // the optional ones must not be references; test/contract/generated-types.test.ts checks the
    // types that come of it.
    const optional = new Set<string>()
    let checked = 0
    for (const { operation } of operations(served)) {
      for (const status of Object.keys(operation.responses)) {
        for (const [name, header] of Object.entries(response(operation, status)?.headers ?? {})) {
          const where = `${operation.operationId} ${status} ${name}`
          const target = resolve<{ description: string; example: unknown; required?: boolean }>(
            header,
            'headers',
          )
          assert.ok(target.description, `${where} has no description`)
          assert.notEqual(target.example, undefined, `${where} has no example`)
          if (header.$ref === undefined) {
            assert.notEqual(target.required, true, `${where} is required but written out`)
            optional.add(`${operation.operationId} ${name}`)
          } else {
            assert.equal(target.required, true, `${where} is a reference but not required`)
          }
          checked++
        }
      }
    }
    assert.ok(checked > 20, `only ${checked} headers`)
    assert.deepStrictEqual([...optional].sort(), [
      'createPet Idempotent-Replayed',
      'createPet RateLimit',
      'createPet RateLimit-Policy',
      'getPet RateLimit',
      'getPet RateLimit-Policy',
      'listPets Link',
      'listPets RateLimit',
      'listPets RateLimit-Policy',
    ])
  })

  test('every error response is a reference to components.responses', () => {
    for (const { operation } of operations(served)) {
      for (const [status, answer] of Object.entries(operation.responses)) {
        if (Number(status) < 400) continue
        assert.match(
          (answer as Reference).$ref ?? '',
          /^#\/components\/responses\//,
          `${operation.operationId} ${status} is written out in full`,
        )
      }
    }
  })

  test('each error example is the catalog’s, on its own status (a 401 is unauthorized, 401)', () => {
    let checked = 0
    for (const { operation } of operations(served)) {
      for (const status of Object.keys(operation.responses)) {
        if (Number(status) < 400) continue
        const examples = response(operation, status)?.content?.['application/json']?.examples
        assert.ok(examples, `${operation.operationId} ${status} has no examples`)
        for (const [code, reference] of Object.entries(examples)) {
          const example = resolve<Example>(reference, 'examples')
          assert.deepStrictEqual(
            example.value,
            errorBody(code as ErrorCode, errorCatalog[code as ErrorCode].example),
            `${operation.operationId} ${status}: ${code}`,
          )
          assert.equal(errorCatalog[code as ErrorCode].status, Number(status), code)
          checked++
        }
      }
    }
    assert.ok(checked >= 16, `only ${checked} examples`)
    const unauthorized = response(operation('listPets'), '401')?.content?.['application/json']
    assert.deepStrictEqual(
      resolve<Example>(unauthorized?.examples?.unauthorized ?? { $ref: '' }, 'examples').value,
      {
        code: 'unauthorized',
        message: errorCatalog.unauthorized.example,
        status: 401,
      },
    )
  })

  test('every 503 says when to retry (Retry-After)', () => {
    for (const { operation } of operations(served)) {
      const unavailable = response(operation, '503')
      assert.ok(unavailable, `${operation.operationId} has no 503`)
      assert.ok(unavailable.headers?.['Retry-After'], `${operation.operationId} 503`)
    }
  })

  test('Pet, NewPet and Pets have examples, and the NewPet example is a valid create', async () => {
    const { Pet, NewPet, Pets } = served.components.schemas
    const [newPet] = NewPet?.examples ?? []
    const [pet] = Pet?.examples ?? []
    const [page] = (Pets?.examples ?? []) as unknown[][]
    assert.ok(newPet && pet && page?.length, 'an example is missing')
    assert.deepStrictEqual(Object.keys(pet as object).sort(), [
      'categoryId',
      'id',
      'name',
      'status',
    ])
    const created = await server.request('/v1/pets', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(newPet),
    })
    assert.equal(created.status, 201)
    const { id, ...fields } = (await created.json()) as { id: number }
    assert.ok(id > 0)
    assert.deepStrictEqual(fields, newPet)
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

  test('docs/api.md lists exactly these codes, each with its status', async () => {
    const page = await readFile(new URL('../docs/api.md', import.meta.url), 'utf8')
    const section = page.slice(page.indexOf('## Errors'), page.indexOf('## Limits'))
    const rows = [...section.matchAll(/^\| `([a-z_]+)` +\| (\d{3}) +\|/gm)].map(
      ([, code, status]) => [code, Number(status)],
    )
    assert.deepStrictEqual(
      rows,
      errorCodes.map((code) => [code, errorCatalog[code].status]),
    )
  })
})

test('every schema of the contract is valid JSON Schema (the service skips this check at start)', () => {
  // src/http/validation.ts turns Ajv's validateSchema off: the check happens here, once.
  const ajv = new Ajv({ formats: { int64: true } })
  for (const schema of [...sharedSchemas, ListPetsQuery, GetPetParams, CreatePetHeaders]) {
    assert.equal(ajv.validateSchema(schema), true, JSON.stringify(ajv.errors))
  }
  assert.equal(ajv.validateSchema({ type: 'integer', minimum: 'one' }), false, 'it can fail')
})

test('the Idempotency-Key schema is for the document only: the handler alone judges a key', () => {
  // With its pattern and lengths, Ajv would refuse these before the handler (another message),
  // and `k, "k"` (the field sent twice, joined by Node) which the handler accepts.
  const property = CreatePetHeaders.properties['Idempotency-Key']
  const sent = ['two words', '', 'k, "k"', 'k'.repeat(256)]
  const ajv = new Ajv({ formats: { int64: true } })
  const strict = ajv.compile(property)
  for (const value of sent) assert.equal(strict(value), false, value)
  const validate = validatorCompiler(sharedSchemas)({
    schema: CreatePetHeaders,
    httpPart: 'headers',
    method: 'POST',
    url: '/v1/pets',
  }) as (data: unknown) => boolean
  for (const value of sent) {
    assert.equal(validate({ 'idempotency-key': value, 'Idempotency-Key': value }), true, value)
  }
})

test('every schema a route declares, as the OpenAPI document shows it, is valid JSON Schema', async () => {
  // The document is written from every route's schemas, so a route added later is covered here
  // even if the list above forgets it.
  const document = JSON.parse(
    await readFile(new URL('../docs/openapi.json', import.meta.url), 'utf8'),
  ) as {
    paths: Record<string, Record<string, OperationSchemas>>
    components: { schemas: Record<string, object>; parameters: Record<string, Parameter> }
  }
  const schemas: [string, object][] = Object.entries(document.components.schemas)
  for (const [name, parameter] of Object.entries(document.components.parameters)) {
    schemas.push([`components.parameters.${name}`, parameter.schema])
  }
  for (const [path, operations] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      for (const parameter of operation.parameters ?? []) {
        if ('$ref' in parameter) continue // a component, above
        schemas.push([`${method} ${path} ${parameter.name}`, parameter.schema])
      }
      for (const [type, { schema }] of Object.entries(operation.requestBody?.content ?? {})) {
        schemas.push([`${method} ${path} body ${type}`, schema])
      }
    }
  }
  assert.ok(schemas.length >= 10, `${schemas.length} schemas found`)
  const ajv = new Ajv({ formats: { int64: true } })
  for (const [where, schema] of schemas) {
    assert.equal(ajv.validateSchema(schema), true, `${where}: ${JSON.stringify(ajv.errors)}`)
  }
})

interface Parameter {
  name: string
  schema: object
}

interface OperationSchemas {
  parameters?: (Parameter | { $ref: string })[]
  requestBody?: { content: Record<string, { schema: object }> }
}
