// The app without its database: the service's own app, every plugin, hook, schema and header
// included, with the database taken out. Its store computes the seeded pets (seed.ts) in memory,
// so its answers are byte for byte the service's. Measured against the ceiling, it shows how much
// of the gap is the app (Fastify and the cross-cutting concerns) and how much is SQLite. Not the
// framework floor (fastify-floor.ts: bare Fastify with the database).
//
//   node scripts/bench/app-without-db.ts <pets>   (PORT, PETSTORE_API_KEYS in the environment)

import { loadConfig } from '../../src/config.ts'
import type { Pet, PetStatus } from '../../src/contract/schemas.ts'
import { composeApp } from '../../src/process/compose.ts'
import type { ApiKeyRepository, Store } from '../../src/store/store.ts'
import { seededPet } from './seed.ts'

const count = Number(process.argv[2])

function pet(id: number): Pet {
  const { name, categoryId, status } = seededPet(id)
  return status === null ? { id, name, categoryId } : { id, name, categoryId, status }
}

const matches = (id: number, status: PetStatus | undefined) =>
  status === undefined || seededPet(id).status === status

const noKeys: ApiKeyRepository = {
  create: () => Promise.reject(new Error('no keys here')),
  findActiveByHash: async () => undefined,
  list: async () => [],
  revoke: async () => false,
  countActive: async () => 0,
  createFirst: () => Promise.reject(new Error('no keys here')),
}

const store: Store = {
  pets: {
    create: () => Promise.reject(new Error('read-only')),
    createIdempotent: () => Promise.reject(new Error('read-only')),
    purgeIdempotencyRecords: async () => 0,
    get: async (id) => (id >= 1 && id <= count ? pet(id) : undefined),
    list: async ({ limit, status, afterId }) => {
      const pets: Pet[] = []
      let id = afterId + 1
      for (; id <= count && pets.length < limit; id++) if (matches(id, status)) pets.push(pet(id))
      while (id <= count && !matches(id, status)) id++
      return { pets, hasMore: id <= count }
    },
  },
  apiKeys: noKeys,
  migrate: async () => ({ applied: [], newer: [] }),
  schema: async () => ({ applied: [], pending: [], newer: [], known: [] }),
  ping: async () => {},
  close: async () => {},
  reportOutagesTo: () => {},
  observe: () => {},
}

// Wired as the service is, from its configuration: PETSTORE_API_KEYS from the environment.
const app = await composeApp(
  loadConfig({
    PETSTORE_API_KEYS: process.env.PETSTORE_API_KEYS,
    PETSTORE_RATE_LIMIT: '0',
    PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '0',
    LOG_LEVEL: 'warn',
  }),
  store,
)
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' })
process.once('SIGTERM', () => {
  app.close().then(() => process.exit(0))
})
