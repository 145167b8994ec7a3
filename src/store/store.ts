// The storage interface the HTTP layer depends on. One implementation per engine (sqlite/,
// postgres/, on the SQL core of sql-core.ts), each proven by the shared contract suite in
// test/store.
// The store knows nothing of HTTP; it speaks in the contract's types. What it keeps for a replay
// (D14, StoredOutcome) is the HTTP layer's: numbers and text it stores and returns as given.

import type { DeploymentEnv } from '../contract/api-key.ts'
import type { NewPet, Pet, PetStatus } from '../contract/schemas.ts'
import type { OutageLogger } from '../outage-log.ts'
import type { DatabaseEnvironment } from './environment.ts'
import type { MigrationRun, SchemaState } from './migrations.ts'
import type { StagingData } from './staging.ts'

export interface ListPetsQuery {
  limit: number
  status?: PetStatus | undefined
  /** Return pets with an id greater than this (0 for the first page). */
  afterId: number
}

export interface PetPage {
  pets: Pet[]
  /** True when at least one more pet follows the last one returned. */
  hasMore: boolean
}

/**
 * What a replay answers with (D14): the first request's status, body (JSON text) and Location,
 * as the HTTP layer gave them (routes/pets.ts); the store never reads them. The answer itself,
 * not the pet's id, so that a replay is the first answer even after Pet changes (D14 in
 * docs/decisions.md).
 */
export interface StoredOutcome {
  status: number
  body: string
  location: string
}

/** An idempotency record as stored: the outcome, and what identifies the request it answered. */
export interface IdempotencyRecord extends StoredOutcome {
  /** SHA-256 of the canonical request (routes/idempotency.ts). */
  fingerprint: string
  createdAt: Date
}

/** A create under an `Idempotency-Key` (D14). */
export interface IdempotencyClaim {
  /** The API key that sent the request: keys are scoped to it, never shared between API keys. */
  apiKeyId: string
  /** The `Idempotency-Key` value. */
  key: string
  fingerprint: string
  /** When the request came (the app's clock): the record's created_at. */
  now: Date
  /** A record created at or before this has expired: the key is new again. */
  expiredAt: Date
  /** The outcome stored with the pet, in the same transaction, its id filled in. */
  outcome: OutcomeAroundId
}

/**
 * Text that holds the new pet's id: what comes before it and after it. Only the store knows the
 * id when it writes the record, and a store may write the record in the same statement as the
 * pet (PostgreSQL), so the record's text is given around the id rather than made from the pet.
 */
export interface AroundId {
  before: string
  after: string
}

/** A StoredOutcome before the pet has its id. */
export interface OutcomeAroundId {
  status: number
  body: AroundId
  location: AroundId
}

/** The text with the id in its place. */
export function withId(text: AroundId, id: number): string {
  return `${text.before}${id}${text.after}`
}

/** Either the pet was made now (and its record stored with it), or a live record was found. */
export type IdempotentCreate =
  | { created: Pet; found?: undefined }
  | { created?: undefined; found: IdempotencyRecord }

/**
 * The key is held by a request still being processed (its transaction has not ended) past the
 * wait the store allows: answered 409 `idempotency_key_in_use` (D14).
 */
export class IdempotencyKeyInUseError extends Error {
  override name = 'IdempotencyKeyInUseError'
}

export interface PetRepository {
  /** Resolves only once the pet is durably committed (D10). */
  create(pet: NewPet): Promise<Pet>
  /**
   * D14: the pet and its idempotency record commit in one transaction, unless a live record
   * for (apiKeyId, key) exists, which is returned instead and nothing is written. Two claims on
   * one key never both insert; the second finds the first's record once it has committed.
   */
  createIdempotent(pet: NewPet, claim: IdempotencyClaim): Promise<IdempotentCreate>
  /**
   * Deletes at most `limit` records created at or before `expiredAt`, in one short transaction;
   * returns how many. The caller repeats while it returns `limit`.
   */
  purgeIdempotencyRecords(expiredAt: Date, limit: number): Promise<number>
  /**
   * The reads answer at once where the engine can (SQLite: its reads are synchronous calls), so
   * that the handler sends the answer in the same turn, without a promise; else a promise.
   */
  get(id: number): MaybePromise<Pet | undefined>
  /** Pets in ascending id order. */
  list(query: ListPetsQuery): MaybePromise<PetPage>
}

/** A value now, or a promise of it later. */
export type MaybePromise<T> = T | Promise<T>

export interface ApiKeyRecord {
  id: string
  name: string
  /** Enough of the key to recognise it (prefix and last characters); never the secret. */
  hint: string
  createdAt: Date
  revokedAt?: Date | undefined
}

export interface NewApiKeyRecord {
  id: string
  name: string
  hint: string
  /** SHA-256 of the key, hex. The key itself is never stored. */
  hash: string
}

/** Where look-ups of keys by hash are counted (keys/verifier.ts asks; metrics.ts counts, D3). */
export interface KeyLookupObserver {
  lookedUp(active: boolean): void
}

export interface ApiKeyRepository {
  create(key: NewApiKeyRecord): Promise<ApiKeyRecord>
  /** The id of the active (not revoked) key with this hash. */
  findActiveByHash(hash: string): Promise<string | undefined>
  list(): Promise<ApiKeyRecord[]>
  /** False when no active key has this id. */
  revoke(id: string): Promise<boolean>
  countActive(): Promise<number>
  /**
   * D3's first key: creates `key` only when no active key exists, as one atomic step across
   * every process on the database (instances starting together on an empty one make one key).
   * Undefined when a key existed, and nothing was created.
   */
  createFirst(key: NewApiKeyRecord): Promise<ApiKeyRecord | undefined>
}

/** Whole when opened: its repositories work once migrate() has made the tables. */
export interface Store {
  readonly pets: PetRepository
  readonly apiKeys: ApiKeyRepository
  /** D29: a staging database emptied and seeded (staging.ts); not for serving. */
  readonly staging: StagingData
  /** D29: who made the database, as recorded (environment.ts). */
  readonly environment: DatabaseEnvironment
  /**
   * Applies pending migrations (D27): what it applied, and a newer release's migrations it found
   * and may serve under. Throws SchemaTooNewError, changing nothing, where it may not, and
   * DatabaseEnvironmentError on a database recorded as one `environment` must not use. A new
   * database records `environment` (the process's PETSTORE_ENV) as the one that made it;
   * production where the caller has none to give, the side on which staging commands refuse.
   */
  migrate(environment?: DeploymentEnv): Promise<MigrationRun>
  /** D27: the schema against this release's migrations, read without changing anything. */
  schema(): Promise<SchemaState>
  /**
   * Throws when the database cannot be reached, or cannot be written while writes fail
   * (readiness).
   */
  ping(): Promise<void>
  /** Finishes pending writes, then closes. */
  close(): Promise<void>
  /**
   * Where the store says that it fails and that it works again, once each (outages.ts), rather
   * than each request saying it. Silent until called.
   */
  reportOutagesTo(log: OutageLogger): void
  /**
   * D17: where the store reports what operators graph (metrics.ts turns it into Prometheus
   * figures). The store knows nothing of what listens; unobserved until called.
   */
  observe(observer: StoreObserver): void
  /**
   * D23: a store that commits creates together (SQLite's group commit) says to tracing which
   * creates each commit carried. Only called while tracing is on.
   */
  traceCommits?(tracer: CommitTracer): void
}

/** D23: what tracing keeps of each queued create, opaque to the store, and is told at commit. */
export interface CommitTracer {
  /** Called as a create is queued, in its request's context. */
  queued(): object | undefined
  /** A commit: what queued() gave for each of its creates; performance.now() times. */
  committed(queued: ReadonlyArray<object | undefined>, began: number, ended: number): void
}

/** What a store reports as it works (D17); every method is cheap and never throws. */
export interface StoreObserver {
  /** A transaction that created `batchSize` pets committed after `seconds` (BEGIN to COMMIT). */
  committed(batchSize: number, seconds: number): void
  /** For a store with a connection pool: read at each scrape. */
  pool?(stats: () => PoolStats): void
  /**
   * The database fails (true: a request was answered 503 because it cannot be reached, is locked
   * past its wait or cannot be written) or works again (false: a commit; on PostgreSQL, any
   * answer). Told once per change, as the log is (outages.ts).
   */
  unavailable?(failing: boolean): void
}

/** The observer of a store nobody observes. */
export const unobserved: StoreObserver = { committed() {} }

/** A connection pool's state now. */
export interface PoolStats {
  /** Connections running a query. */
  inUse: number
  /** Connections open and waiting for work. */
  idle: number
  /** Queries waiting for a connection. */
  waiting: number
}

export interface StoreUnavailableOptions extends ErrorOptions {
  /** What a client may be told; no internals. */
  reason?: string
  /** The Retry-After a client is given. */
  retryAfterSeconds?: number
}

/**
 * The database cannot be reached, is locked past its timeout, or cannot be written (a full or
 * read-only disk, an I/O error): the request may succeed if retried later. The HTTP layer answers
 * 503 `unavailable` (D4, D16) with `reason` and Retry-After, instead of 500.
 */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError'
  readonly reason: string
  readonly retryAfterSeconds: number

  constructor(message: string, options: StoreUnavailableOptions = {}) {
    super(message, options)
    this.reason = options.reason ?? 'the database is unreachable'
    this.retryAfterSeconds = options.retryAfterSeconds ?? 1
  }
}

/** The database cannot be opened at all (a path that cannot be made, a file that is no database). */
export class StoreOpenError extends Error {
  override name = 'StoreOpenError'
}
