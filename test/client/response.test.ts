// `pets.withResponse` (D18) against the real service listening on a port: what the service says
// beside the value of every successful call, parsed, and the deprecation warning said once per
// process (in a process of its own).
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { GET_PET_SUNSET, Petstore } from '../../client/src/index.ts'
import { parseBudget, parseDeprecation } from '../../client/src/response.ts'
import { ManualClock, startServer, type TestServer } from '../helpers/server.ts'

const REQUEST_ID = /^[\w.:-]{1,128}$/

const run = promisify(execFile)

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = []
  for await (const item of items) all.push(item)
  return all
}

describe('withResponse against a production service with a rate limit', () => {
  // Eighteen seconds into the rate limit's minute: each budget resets in 42 s.
  const clock = new ManualClock(Date.UTC(2027, 0, 1, 12, 0, 18))
  let server: TestServer
  let petstore: Petstore

  before(async () => {
    server = await startServer({ rateLimit: 600, clock })
    petstore = new Petstore({ baseUrl: `${server.url}/v1`, apiKey: server.key })
  })
  after(() => server.close())

  test('create: the pet as data; status, request id, the budget as numbers, no replay', async () => {
    const { data, response } = await petstore.pets.withResponse.create(
      { name: 'Meta', categoryId: 3 },
      { idempotencyKey: 'meta-1' },
    )
    assert.deepEqual(Object.keys(data), ['id', 'name', 'categoryId'])
    assert.equal(response.status, 201)
    assert.match(response.requestId ?? '', REQUEST_ID)
    assert.equal(response.requestId, response.headers.get('x-request-id'))
    assert.deepEqual(response.rateLimit, {
      policy: 'default',
      remaining: 599,
      reset: 42,
      quota: 600,
      window: 60,
    })
    assert.equal(response.idempotentReplayed, false)
    assert.equal(response.deprecation, undefined)
    assert.equal(response.sunset, undefined)
    assert.equal(response.preferenceApplied, undefined)

    const replay = await petstore.pets.withResponse.create(
      { name: 'Meta', categoryId: 3 },
      { idempotencyKey: 'meta-1' },
    )
    assert.deepEqual(replay.data, data)
    assert.equal(replay.response.status, 201)
    assert.equal(replay.response.idempotentReplayed, true)
    assert.equal(replay.response.rateLimit?.remaining, 598)
    assert.notEqual(replay.response.requestId, response.requestId)
  })

  test('get: deprecation and sunset as Dates', async () => {
    const pet = await petstore.pets.create({ name: 'Old', categoryId: 1 })
    const { data, response } = await petstore.pets.withResponse.get(pet.id)
    assert.deepEqual(data, pet)
    assert.deepEqual(response.deprecation, parseDeprecation(response.headers.get('deprecation')))
    assert.ok((response.deprecation?.getTime() ?? Infinity) <= Date.now())
    assert.deepEqual(response.sunset, new Date(GET_PET_SUNSET))
  })

  test('a process that calls get three times is warned once, with the sunset date', async () => {
    const pet = await petstore.pets.create({ name: 'Warned', categoryId: 1 })
    // A process of its own: the warning is said once per process, and this one may have said it.
    const program = `
      import { Petstore } from ${JSON.stringify(new URL('../../client/src/index.ts', import.meta.url).href)}
      const warnings = []
      process.on('warning', (w) => warnings.push({ name: w.name, code: w.code, message: w.message }))
      const petstore = new Petstore({ baseUrl: process.env.BASE, apiKey: process.env.KEY })
      await petstore.pets.get(${pet.id})
      await petstore.pets.withResponse.get(${pet.id})
      await petstore.pets.get(${pet.id})
      setImmediate(() => console.log(JSON.stringify(warnings)))`
    const { stdout, stderr } = await run(process.execPath, ['--input-type=module', '-e', program], {
      env: { ...process.env, BASE: `${server.url}/v1`, KEY: server.key },
    })
    const warnings = JSON.parse(stdout) as { name: string; code: string; message: string }[]
    assert.equal(warnings.length, 1, stdout)
    assert.equal(warnings[0]?.name, 'DeprecationWarning')
    assert.equal(warnings[0]?.code, 'PETSTORE_DEPRECATED_OPERATION')
    assert.match(
      warnings[0]?.message ?? '',
      /^Petstore: getPet \(pets\.get\) is deprecated by the service; its sunset is Thu, 05 Dec 2030 00:00:00 GMT, after which it fails with 410 gone\./,
    )
    // Node.js's own line for it on stderr, once.
    assert.equal(stderr.match(/DeprecationWarning: Petstore: getPet/g)?.length, 1, stderr)
  })

  test('pages and listPage: each page with its metadata; list and listPage return what they did', async () => {
    for (let i = 0; i < 3; i++) await petstore.pets.create({ name: `Paged ${i}`, categoryId: 9 })
    const all = await collect(petstore.pets.list({ limit: 2 }))
    const pages = await collect(petstore.pets.withResponse.pages({ limit: 2 }))
    assert.deepEqual(
      pages.flatMap((page) => page.data.pets),
      all,
    )
    assert.ok(pages.length >= 3)
    for (const page of pages.slice(0, -1)) assert.equal(typeof page.data.nextCursor, 'string')
    assert.equal(pages.at(-1)?.data.nextCursor, undefined)
    const ids = new Set(pages.map((page) => page.response.requestId))
    assert.equal(ids.size, pages.length, 'a request id per page')

    const first = await petstore.pets.withResponse.listPage({ limit: 2 })
    assert.deepEqual(first.data, await petstore.pets.listPage({ limit: 2 }))
    assert.deepEqual(Object.keys(first.data), ['pets', 'nextCursor'])
    assert.equal(first.response.status, 200)
    assert.equal(first.response.rateLimit?.quota, 600)
  })
})

test('withResponse against staging: Preference-Applied as sent back, no budget when limits are off', async () => {
  const server = await startServer({ env: 'staging', rateLimit: 0 })
  try {
    const petstore = new Petstore({ baseUrl: `${server.url}/v1`, apiKey: server.key })
    const { response } = await petstore.pets.withResponse.listPage({}, { prefer: 'delay=1' })
    assert.equal(response.preferenceApplied, 'delay=1')
    assert.equal(response.rateLimit, undefined)
  } finally {
    await server.close()
  }
})

test('the budget and the deprecation date are read as RFC 9651 structured fields', () => {
  assert.deepEqual(parseBudget('"default";r=5;t=7', '"default";q=10;w=60'), {
    policy: 'default',
    remaining: 5,
    reset: 7,
    quota: 10,
    window: 60,
  })
  // The policy of the same name, wherever it is in the list; a token name as well as a string.
  assert.deepEqual(parseBudget('burst;r=1;t=2', '"other";q=9;w=9, burst;q=3;w=10'), {
    policy: 'burst',
    remaining: 1,
    reset: 2,
    quota: 3,
    window: 10,
  })
  assert.deepEqual(parseBudget('"default";r=5;t=7', null)?.quota, undefined)
  assert.equal(parseBudget('"default";r=x;t=7', '"default";q=10;w=60'), undefined)
  assert.equal(parseBudget(null, '"default";q=10;w=60'), undefined)
  assert.deepEqual(parseDeprecation('@1795305600'), new Date('2026-11-22T00:00:00Z'))
  assert.equal(parseDeprecation('true'), undefined)
})
