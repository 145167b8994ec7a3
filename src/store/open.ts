// Picks the store implementation the configured DATABASE_URL names. Each engine's module is
// loaded only when it is used: on SQLite the PostgreSQL driver is never loaded, and with the
// Redis client loaded the same way (process/instance.ts) a SQLite service starts smaller.
import { resolve } from 'node:path'
import type { DatabaseLocation } from '../config.ts'
import { address } from './postgres/refusals.ts'
import type { Store } from './store.ts'

/** Where the data is, for the start line: never the URL itself, which may carry a password. */
export interface DatabaseDescription {
  fields: Record<string, string | number>
  text: string
}

export function describeDatabase(location: DatabaseLocation): DatabaseDescription {
  if (location.engine === 'sqlite') {
    if (location.path === ':memory:') {
      return {
        fields: { engine: 'sqlite', database: ':memory:' },
        text: 'SQLite in memory (lost when the process ends)',
      }
    }
    const path = resolve(location.path)
    return { fields: { engine: 'sqlite', database: path }, text: `SQLite database ${path}` }
  }
  const url = new URL(location.url)
  // A Unix socket is given as ?host=/folder (config.ts); libpq's default port is 5432.
  // URL keeps an IPv6 address in brackets; the fields and address() want it bare.
  const host = url.searchParams.get('host') ?? url.hostname.replace(/^\[(.*)\]$/, '$1')
  const port = Number(url.searchParams.get('port') ?? (url.port || 5432))
  const database = decodeURIComponent(url.pathname.slice(1))
  const user = decodeURIComponent(url.username)
  const where = address({ host, port })
  return {
    fields: {
      engine: 'postgres',
      host,
      port,
      database,
      ...(user === '' ? {} : { user }),
      pooler: location.pooler,
      poolSize: location.poolSize,
    },
    text: `PostgreSQL database "${database}" at ${where}${user === '' ? '' : ` as "${user}"`}, pooler ${location.pooler}, pool ${location.poolSize}`,
  }
}

export async function openStore(location: DatabaseLocation): Promise<Store> {
  switch (location.engine) {
    case 'sqlite': {
      const { openSqliteStore } = await import('./sqlite/store.ts')
      return openSqliteStore({ path: location.path })
    }
    case 'postgres': {
      const { openPostgresStore } = await import('./postgres/store.ts')
      return openPostgresStore({
        url: location.url,
        poolSize: location.poolSize,
        pooler: location.pooler,
      })
    }
  }
}

/** Opens the store `location` names, runs `work` on it, and closes it whatever `work` did. */
export async function onOpenStore<T>(
  location: DatabaseLocation,
  work: (store: Store) => Promise<T>,
): Promise<T> {
  const store = await openStore(location)
  try {
    return await work(store)
  } finally {
    await store.close()
  }
}
