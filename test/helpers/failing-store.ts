// A real store with some of its operations replaced: one that fails, hangs until the test lets
// it go, or commits and then loses the answer. Tests of how the HTTP layer meets a failing
// database (D4, D11, D14, D16) build their store here rather than wrapping one by hand.
import type { ApiKeyRepository, PetRepository, Store } from '../../src/store/store.ts'

export interface ReplacedOperations {
  /** Pet operations to run instead of the real ones; the others go to the real store. */
  pets?: Partial<PetRepository>
  /** Key operations to run instead of the real ones (e.g. counting look-ups, D3). */
  apiKeys?: Partial<ApiKeyRepository>
  /** Readiness's check (D1), instead of the real store's. */
  ping?: Store['ping']
}

/**
 * `real`, except for the operations in `replaced`. Migrations and closing always reach the real
 * store, so the server under test starts and stops as usual. It reports no outages and no
 * metrics of its own (`reportOutagesTo` and `observe` do nothing).
 */
export function failingStore(real: Store, replaced: ReplacedOperations): Store {
  return {
    get pets(): PetRepository {
      const pets = real.pets
      return {
        create: (pet) => pets.create(pet),
        createIdempotent: (pet, claim) => pets.createIdempotent(pet, claim),
        purgeIdempotencyRecords: (before, limit) => pets.purgeIdempotencyRecords(before, limit),
        get: (id) => pets.get(id),
        list: (query) => pets.list(query),
        ...replaced.pets,
      }
    },
    get apiKeys(): ApiKeyRepository {
      const keys = real.apiKeys
      return {
        create: (key) => keys.create(key),
        createFirst: (key) => keys.createFirst(key),
        findActiveByHash: (hash) => keys.findActiveByHash(hash),
        list: () => keys.list(),
        revoke: (id) => keys.revoke(id),
        countActive: () => keys.countActive(),
        ...replaced.apiKeys,
      }
    },
    staging: real.staging,
    environment: real.environment,
    migrate: (environment) => real.migrate(environment),
    schema: () => real.schema(),
    ping: replaced.ping ?? (() => real.ping()),
    close: () => real.close(),
    reportOutagesTo: () => {},
    observe: () => {},
  }
}

/**
 * `real`, with its look-ups of keys by hash counted (D3: what the key cache saves the store);
 * everything else, outages, figures and commit spans included, goes to `real` as it is.
 */
export function countingKeyLookups(real: Store): { store: Store; lookups: () => number } {
  let lookups = 0
  const keys = real.apiKeys
  const apiKeys: ApiKeyRepository = {
    create: (key) => keys.create(key),
    createFirst: (key) => keys.createFirst(key),
    findActiveByHash: (hash) => {
      lookups++
      return keys.findActiveByHash(hash)
    },
    list: () => keys.list(),
    revoke: (id) => keys.revoke(id),
    countActive: () => keys.countActive(),
  }
  const store: Store = {
    get pets() {
      return real.pets
    },
    apiKeys,
    staging: real.staging,
    environment: real.environment,
    migrate: (environment) => real.migrate(environment),
    schema: () => real.schema(),
    ping: () => real.ping(),
    close: () => real.close(),
    reportOutagesTo: (log) => real.reportOutagesTo(log),
    observe: (observer) => real.observe(observer),
    ...(real.traceCommits ? { traceCommits: (tracer) => real.traceCommits?.(tracer) } : {}),
  }
  return { store, lookups: () => lookups }
}
