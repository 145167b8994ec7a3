// D27, the upgrade promise: any two consecutive releases serve one database together
// (`npm run test:upgrade`, in .ci/run: it takes about a minute, beyond npm test's budget). The
// previous release (test/upgrade/previous-release) and this one, on one SQLite file and on one
// PostgreSQL database: the previous release makes the database; this one joins it under load,
// migrating while the previous serves (a mixed fleet); the previous leaves; then a rollback, the
// previous release serving again on the database this one migrated. Every acknowledged create is
// there once, with its id, an Idempotency-Key replays across releases, and a key this release
// made works on the previous one. Last, a made-up future migration: a contract step refused, an
// expand step served.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { generateApiKey } from '../../src/contract/api-key.ts'
import { describeMigration } from '../../src/store/migrations.ts'
import { sqliteMigrations } from '../../src/store/sqlite/migrations.ts'
import { type Ledger, postgresLedger, sqliteLedger } from '../helpers/ledger.ts'
import { createTestDatabase, postgresSkipReason } from '../helpers/postgres.ts'
import {
  type PreviousRelease,
  previousRelease,
  previousReleaseSkipReason,
} from '../helpers/previous-release.ts'
import { runCli, type ServiceProcess, startService } from '../helpers/process.ts'
import { tempDir } from '../helpers/server.ts'

/** Both engines number their migrations alike; the newest is the one this release adds. */
const NEWEST_MIGRATION = sqliteMigrations.at(-1) ?? { version: 0, name: 'none' }

const skipPrevious = previousReleaseSkipReason()
// CI runs it where it cannot skip: a history without the previous release fails there.
if (skipPrevious !== undefined && process.env.PETSTORE_REQUIRE_UPGRADE === '1') {
  throw new Error(`${skipPrevious}; PETSTORE_REQUIRE_UPGRADE=1 makes that a failure`)
}
const skipPostgres = await postgresSkipReason()
const WORKERS = 6
/** Each worker's pause between creates: a steady load, not all the cores. */
const THINK_MS = 5

interface Created {
  name: string
  id: number
}

/**
 * Creates with an Idempotency-Key, spread over the instances serving, each sometimes sent again
 * with its key to another instance (a client's retry after a lost answer). A network error is
 * retried with the same key elsewhere, as the SDK would; a retry must replay the first pet.
 */
class MixedLoad {
  readonly created: Created[] = []
  readonly failures: string[] = []
  /** Retries sent to another instance that replayed the first answer. */
  replays = 0
  #urls: string[] = []
  #running = true
  #next = 0
  readonly #done: Promise<unknown>
  readonly #apiKey: string
  readonly #prefix: string

  constructor(apiKey: string, prefix: string) {
    this.#apiKey = apiKey
    this.#prefix = prefix
    this.#done = Promise.all(Array.from({ length: WORKERS }, (_, w) => this.#worker(w)))
  }

  serving(urls: string[]): void {
    this.#urls = urls
  }

  async stop(): Promise<void> {
    this.#running = false
    await this.#done
  }

  #pick(not?: string): string | undefined {
    const urls = this.#urls.filter((url) => url !== not)
    return urls.length === 0 ? this.#urls[0] : urls[this.#next++ % urls.length]
  }

  async #worker(w: number): Promise<void> {
    for (let n = 0; this.#running; n++) {
      if (this.#urls.length === 0) {
        await delay(10)
        continue
      }
      const name = `${this.#prefix}${w}-${n}`
      const key = `upgrade-${w}-${n}`
      const first = await this.#create(name, key)
      if (first === undefined) continue
      this.created.push(first.pet)
      if (n % 3 === 0) {
        const again = await this.#create(name, key, first.url)
        if (again !== undefined && again.pet.id !== first.pet.id) {
          this.failures.push(`${key}: replayed as pet ${again.pet.id}, first made ${first.pet.id}`)
        } else if (again !== undefined) this.replays++
      }
      await delay(THINK_MS)
    }
  }

  async #create(
    name: string,
    key: string,
    not?: string,
  ): Promise<{ pet: Created; url: string } | undefined> {
    let last = ''
    let avoid = not
    for (let attempt = 0; attempt < 4; attempt++) {
      const url = this.#pick(avoid)
      if (url === undefined) break
      try {
        const response = await fetch(`${url}/v1/pets`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${this.#apiKey}`,
            'content-type': 'application/json',
            'idempotency-key': key,
          },
          body: JSON.stringify({ name, categoryId: 1 }),
        })
        const body = (await response.json()) as Created
        if (response.status === 201) return { pet: { name: body.name, id: body.id }, url }
        last = `${response.status} ${JSON.stringify(body)}`
      } catch (err) {
        last = String(err)
      }
      avoid = url
      await delay(50)
    }
    this.failures.push(`${key}: ${last}`)
    return undefined
  }
}

/** Every pet whose name starts with `prefix`, read through the API, page by page. */
async function petsNamed(url: string, apiKey: string, prefix: string): Promise<Created[]> {
  const found: Created[] = []
  let next: string | undefined = `${url}/v1/pets?limit=100`
  while (next !== undefined) {
    const response: Response = await fetch(next, { headers: { authorization: `Bearer ${apiKey}` } })
    assert.equal(response.status, 200)
    const page = (await response.json()) as Created[]
    found.push(...page.filter((pet) => pet.name.startsWith(prefix)))
    const link = /<([^>]+)>;\s*rel="next"/.exec(response.headers.get('link') ?? '')?.[1]
    next = link === undefined ? undefined : new URL(link, url).toString()
  }
  return found
}

/** Every acknowledged create stored once, as acknowledged; nothing stored twice. */
function assertEachOnce(stored: Created[], load: MixedLoad): void {
  assert.deepEqual(
    load.failures.slice(0, 5),
    [],
    `${load.failures.length} creates not acknowledged or retries not replayed`,
  )
  assert.ok(load.created.length >= 50, `only ${load.created.length} creates were made`)
  const byName = new Map<string, number[]>()
  for (const pet of stored) byName.set(pet.name, [...(byName.get(pet.name) ?? []), pet.id])
  const twice = [...byName].filter(([, ids]) => ids.length > 1)
  assert.deepEqual(twice, [], 'no create made two pets')
  const lost = load.created.filter((pet) => byName.get(pet.name)?.[0] !== pet.id)
  assert.deepEqual(lost, [], 'every acknowledged create is stored as acknowledged')
}

/** The releases side by side on one database; returns the figures for the closing lines. */
async function upgradeAndRollBack(
  previous: PreviousRelease,
  env: Record<string, string>,
  ledger: Ledger,
  say: (line: string) => void,
): Promise<void> {
  const apiKey = env.PETSTORE_API_KEYS ?? ''
  const load = new MixedLoad(apiKey, 'upgrade ')
  const instances: ServiceProcess[] = []
  try {
    const old = await startService(env, [], { bin: previous.bin })
    instances.push(old)
    load.serving([old.url])
    await delay(500)
    // This release joins, migrating the database while the previous one serves.
    const current = await startService(env)
    instances.push(current)
    // This release's newest migration, which the previous release lacks (CHANGELOG.md).
    assert.ok(
      current.stdout().includes(`applied migration ${describeMigration(NEWEST_MIGRATION)}`),
      current.stdout(),
    )
    load.serving([old.url, current.url])
    await delay(1_500)
    // The rolling upgrade's end: the previous release leaves.
    load.serving([current.url])
    assert.equal(await old.stop(), 0)
    await delay(500)
    // A rollback: the previous release serves the migrated database again, this one leaves.
    const back = await startService(env, [], { bin: previous.bin })
    instances.push(back)
    load.serving([current.url, back.url])
    await delay(1_000)
    load.serving([back.url])
    assert.equal(await current.stop(), 0)
    await delay(500)
    await load.stop()
    const stored = await petsNamed(back.url, apiKey, 'upgrade ')
    assertEachOnce(stored, load)
    say(
      `${previous.version} (${previous.commit.slice(0, 7)}) and this release: ${load.created.length} creates acknowledged, ${load.replays} replayed on the other instance, ${stored.length} pets stored`,
    )

    // Keys made by this release's CLI are the previous release's keys too.
    const made = await runCli(['keys', 'create', '--name', 'made by this release'], env)
    assert.equal(made.code, 0, made.stderr)
    const key = made.stdout.trim()
    const listed = await fetch(`${back.url}/v1/pets?limit=1`, {
      headers: { authorization: `Bearer ${key}` },
    })
    assert.equal(listed.status, 200)
    assert.equal(await back.stop(), 0)
  } finally {
    await load.stop()
    await Promise.all(instances.map((instance) => instance.stop('SIGKILL')))
  }

  // A future release's migrations: an expand step is served, a contract step refused.
  await ledger.add({ version: 1_000, name: 'a table of the future', olderReleasesMayServe: true })
  const status = await runCli(['migrate', '--status'], env)
  assert.equal(status.code, 0, status.stderr)
  assert.match(
    status.stdout,
    /1000 +a table of the future +applied by a newer release; this release may serve it/,
  )
  const serving = await startService(env)
  try {
    assert.match(serving.stdout(), /1000 \(a table of the future\).*so this release serves/)
    assert.equal((await fetch(`${serving.url}/readyz`)).status, 200)
  } finally {
    assert.equal(await serving.stop(), 0)
  }
  await ledger.add({
    version: 1_001,
    name: 'a column of the past dropped',
    olderReleasesMayServe: false,
  })
  const refused = await runCli(['serve'], { ...env, PORT: '0' })
  assert.equal(refused.code, 1)
  assert.equal(refused.stderr.trim().split('\n').length, 1, refused.stderr)
  assert.match(refused.stderr, /1001 \(a column of the past dropped\).*Upgrade this instance/)
}

describe('the previous release beside this one (D27)', { skip: skipPrevious }, () => {
  let previous: PreviousRelease
  before(async () => {
    previous = await previousRelease()
  })
  after(() => previous?.remove())

  test('one SQLite file: mixed, upgraded, rolled back, a future contract refused', async (t) => {
    const dir = await tempDir()
    try {
      const path = join(dir.path, 'upgrade.db')
      const env = {
        DATABASE_URL: `sqlite:${path}`,
        PETSTORE_API_KEYS: generateApiKey('production'),
        PETSTORE_RATE_LIMIT: '0',
      }
      await upgradeAndRollBack(previous, env, sqliteLedger(path), (line) => t.diagnostic(line))
    } finally {
      await dir.remove()
    }
  })

  test('one PostgreSQL database: mixed, upgraded, rolled back, a future contract refused', {
    skip: skipPostgres,
  }, async (t) => {
    const db = await createTestDatabase()
    try {
      const env = {
        DATABASE_URL: db.url,
        DATABASE_POOLER: db.pooler,
        PETSTORE_API_KEYS: generateApiKey('production'),
        PETSTORE_RATE_LIMIT: '0',
      }
      await upgradeAndRollBack(previous, env, postgresLedger(db.url), (line) => t.diagnostic(line))
    } finally {
      await db.drop()
    }
  })
})
