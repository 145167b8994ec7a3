// A real store with some of its operations replaced: one that fails, hangs until the test lets
// it go, or commits and then loses the answer. Tests of how the HTTP layer meets a failing
// database (D4, D11, D14, D16) build their store here rather than wrapping one by hand.
import type { PetRepository, Store } from '../../src/store/store.ts'

export interface ReplacedOperations {
  /** Pet operations to run instead of the real ones; the others go to the real store. */
  pets?: Partial<PetRepository>
  /** Readiness's check (D1), instead of the real store's. */
  ping?: Store['ping']
}

/**
 * `real`, except for the operations in `replaced`. Keys, migrations and closing always reach the
 * real store, so the server under test starts and stops as usual. It reports no outages and no
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
    get apiKeys() {
      return real.apiKeys
    },
    migrate: () => real.migrate(),
    ping: replaced.ping ?? (() => real.ping()),
    close: () => real.close(),
    reportOutagesTo: () => {},
    observe: () => {},
  }
}
