// Picks the store implementation the configured DATABASE_URL names.
import type { DatabaseLocation } from '../config.ts'
import { openPostgresStore } from './postgres.ts'
import { openSqliteStore } from './sqlite.ts'
import type { Store } from './store.ts'

export async function openStore(location: DatabaseLocation): Promise<Store> {
  switch (location.engine) {
    case 'sqlite':
      return openSqliteStore({ path: location.path })
    case 'postgres':
      return openPostgresStore({ url: location.url, poolSize: location.poolSize })
  }
}
