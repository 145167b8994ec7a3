// Test harness: a really listening server on a real SQLite file in a fresh temp directory (or,
// with PETSTORE_TEST_DATABASE=postgres, a fresh PostgreSQL database), composed as the service is
// (src/process/compose.ts), with a clock and limits the test controls.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import type { Clock } from '../../src/clock.ts'
import { type Config, type ConnectionLimits, loadConfig } from '../../src/config.ts'
import type { DeploymentEnv } from '../../src/contract/api-key.ts'
import type { AppParts } from '../../src/http/app.ts'
import { issueApiKey } from '../../src/keys/issue.ts'
import type { Lifecycle } from '../../src/lifecycle.ts'
import { createMetrics } from '../../src/observability/metrics.ts'
import { listenForScrapes, type MetricsServer } from '../../src/observability/metrics-server.ts'
import { composeApp } from '../../src/process/compose.ts'
import type { StagingFaults } from '../../src/staging/faults.ts'
import { openPostgresStore } from '../../src/store/postgres/store.ts'
import { openSqliteStore } from '../../src/store/sqlite/store.ts'
import type { Store } from '../../src/store/store.ts'
import { countingKeyLookups } from './failing-store.ts'
import { createTestDatabase } from './postgres.ts'

/** The engine behind test servers and test stores; `npm test` runs the HTTP tests on both. */
export const TEST_ENGINE: 'sqlite' | 'postgres' =
  process.env.PETSTORE_TEST_DATABASE === 'postgres' ? 'postgres' : 'sqlite'

/** A clock tests move by hand. */
export class ManualClock implements Clock {
  #now: number
  constructor(start: Date | number = Date.now()) {
    this.#now = typeof start === 'number' ? start : start.getTime()
  }
  now(): number {
    return this.#now
  }
  set(to: Date | number): void {
    this.#now = typeof to === 'number' ? to : to.getTime()
  }
  advance(ms: number): void {
    this.#now += ms
  }
}

export interface TestServerOptions {
  /**
   * Reuse a SQLite file (e.g. to restart on it); default: a new database of TEST_ENGINE.
   */
  dbPath?: string
  store?: Store
  rateLimit?: number
  /** D14's PETSTORE_IDEMPOTENCY_TTL; 24 hours unless given. */
  idempotencyTtlSeconds?: number
  clock?: Clock
  corsOrigins?: string[]
  /** PETSTORE_TRUSTED_PROXIES; none unless given. */
  trustedProxies?: string[]
  env?: DeploymentEnv
  bootstrapKeys?: string[]
  lifecycle?: Lifecycle
  /** D16's load shedding; off unless given. */
  loadShedding?: AppParts['loadShedding']
  /** D16's connection limits; the defaults of the configuration unless given. */
  connections?: Partial<ConnectionLimits>
  /** Fastify's logger option (e.g. a stream the test reads); off unless given. */
  logger?: FastifyServerOptions['logger']
  /** D17: metrics with a registry of this server's own, on a listener of their own. */
  metrics?: boolean
  rateLimitCounter?: AppParts['rateLimitCounter']
  /** D3: failed authentications a minute per address; 0 (off) unless given, like rateLimit. */
  authFailureLimit?: number
  authFailureCounter?: AppParts['authFailureCounter']
  /** D3: how long a key's answer from the store is believed; the configuration's default unless given. */
  keyCacheMs?: number
  /** D29: PETSTORE_STAGING_FAULTS (only with env staging); none unless given. */
  stagingFaults?: StagingFaults
  /** D29: the faults' draws; Math.random unless given. */
  random?: () => number
}

export interface TestServer {
  /** e.g. http://127.0.0.1:40123 */
  url: string
  /** A valid API key made with the same code the CLI uses. */
  key: string
  store: Store
  app: FastifyInstance
  /** The SQLite file or PostgreSQL URL of a store the server opened; '' for a given store. */
  dbPath: string
  lifecycle: Lifecycle
  /** With `metrics`: the URL Prometheus would scrape (another port than `url`'s). */
  metricsUrl: string | undefined
  /** D3: how many times the app has looked a key up by hash in the store so far. */
  keyLookups(): number
  /** fetch `path` on this server with the key (unless `headers.authorization` is given). */
  request(path: string, init?: RequestInit): Promise<Response>
  close(): Promise<void>
}

export async function tempDir(): Promise<{ path: string; remove(): Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), 'petstore-test-'))
  return { path, remove: () => rm(path, { recursive: true, force: true }) }
}

export interface TestStore {
  store: Store
  /** The SQLite file, or the PostgreSQL URL. */
  location: string
  /** Closes the store and deletes its database. */
  close(): Promise<void>
}

/**
 * A store on a new, empty database of TEST_ENGINE: a SQLite file in a new temp directory, or a
 * PostgreSQL database created for it. `dbPath` reuses that SQLite file instead (not deleted).
 */
export async function openTestStore(dbPath?: string): Promise<TestStore> {
  if (dbPath !== undefined) {
    const store = openSqliteStore({ path: dbPath })
    return { store, location: dbPath, close: () => store.close() }
  }
  if (TEST_ENGINE === 'postgres') {
    const db = await createTestDatabase()
    const store = openPostgresStore({ url: db.url, poolSize: 5, pooler: db.pooler })
    return {
      store,
      location: db.url,
      close: async () => {
        await store.close()
        await db.drop()
      },
    }
  }
  const dir = await tempDir()
  const path = join(dir.path, 'petstore.db')
  const store = openSqliteStore({ path })
  return {
    store,
    location: path,
    close: async () => {
      await store.close()
      await dir.remove()
    },
  }
}

/** The test's own store, or a new one the server owns (and closes and deletes). */
async function storeFor(options: TestServerOptions): Promise<{ store: Store; owned?: TestStore }> {
  if (options.store !== undefined) return { store: options.store }
  const owned = await openTestStore(options.dbPath)
  return { store: owned.store, owned }
}

/** The default configuration, with what the test's options say instead. */
function testConfig(options: TestServerOptions, env: DeploymentEnv): Config {
  const defaults = loadConfig({})
  return {
    ...defaults,
    env,
    apiKeys: options.bootstrapKeys ?? [],
    rateLimit: options.rateLimit ?? 0,
    authFailureLimit: options.authFailureLimit ?? 0,
    keyCacheMs: options.keyCacheMs ?? defaults.keyCacheMs,
    corsOrigins: options.corsOrigins ?? [],
    trustedProxies: options.trustedProxies ?? [],
    idempotencyTtlSeconds: options.idempotencyTtlSeconds ?? defaults.idempotencyTtlSeconds,
    // D16's load shedding is off unless the test asks: test files share the cores.
    maxEventLoopDelayMs: options.loadShedding?.maxEventLoopDelayMs ?? 0,
    connections: { ...defaults.connections, ...options.connections },
    stagingFaults: options.stagingFaults,
  }
}

export async function startServer(options: TestServerOptions = {}): Promise<TestServer> {
  const { store: given, owned } = await storeFor(options)
  // The app's look-ups of keys are counted at the store (D3).
  const { store, lookups } = countingKeyLookups(given)
  const dbPath = owned?.location ?? options.dbPath ?? ''
  await store.migrate()
  const env = options.env ?? 'production'
  const { key } = await issueApiKey(store.apiKeys, env, 'test')
  const lifecycle = options.lifecycle ?? { draining: false }
  const metrics = options.metrics ? createMetrics() : undefined
  // Wired as the service is (process/compose.ts), from a Config the test's options change.
  const app = await composeApp(testConfig(options, env), store, {
    lifecycle,
    logger: options.logger ?? false,
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.loadShedding?.quietMs === undefined
      ? {}
      : { loadSheddingQuietMs: options.loadShedding.quietMs }),
    ...(options.rateLimitCounter ? { rateLimitCounter: options.rateLimitCounter } : {}),
    ...(options.authFailureCounter ? { authFailureCounter: options.authFailureCounter } : {}),
    ...(metrics ? { metrics } : {}),
    ...(options.random ? { random: options.random } : {}),
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  const url = `http://127.0.0.1:${address.port}`
  let metricsServer: MetricsServer | undefined
  if (metrics !== undefined) {
    const { registry } = metrics
    metricsServer = await listenForScrapes(
      { port: 0, host: '127.0.0.1' },
      { contentType: registry.contentType, body: () => registry.metrics() },
      app.log,
    )
    metricsServer.announce()
  }
  return {
    url,
    key,
    store,
    app,
    dbPath,
    lifecycle,
    metricsUrl: metricsServer?.url,
    keyLookups: lookups,
    request(path, init = {}) {
      const headers = new Headers(init.headers)
      if (!headers.has('authorization')) headers.set('authorization', `Bearer ${key}`)
      return fetch(url + path, { ...init, headers })
    },
    async close() {
      await app.close()
      await metricsServer?.close()
      await owned?.close()
    },
  }
}

/** POST a NewPet as JSON. */
export function createPet(
  server: TestServer,
  body: unknown,
  init: RequestInit = {},
): Promise<Response> {
  const headers = new Headers(init.headers)
  headers.set('content-type', 'application/json')
  return server.request('/v1/pets', {
    ...init,
    method: 'POST',
    headers,
    body: JSON.stringify(body),
  })
}

export interface ErrorBodyShape {
  code: string
  message: string
  status: number
}

/** Reads a response that must be an Error body whose status equals the HTTP status (D4). */
export async function errorOf(response: Response): Promise<ErrorBodyShape> {
  const type = response.headers.get('content-type') ?? ''
  if (!type.startsWith('application/json')) {
    throw new Error(`expected an application/json error, got ${type || 'no content type'}`)
  }
  const body = (await response.json()) as ErrorBodyShape
  if (body.status !== response.status) {
    throw new Error(`Error body status ${body.status} differs from HTTP ${response.status}`)
  }
  if (typeof body.code !== 'string' || typeof body.message !== 'string' || body.message === '') {
    throw new Error(`not an Error body: ${JSON.stringify(body)}`)
  }
  return body
}
