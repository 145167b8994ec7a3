// API keys on PostgreSQL (D3): only their SHA-256 is stored.
import type { ApiKeyRecord, ApiKeyRepository, NewApiKeyRecord } from '../store.ts'
import type { Database, Statement } from './connection.ts'

interface ApiKeyRow {
  id: string
  name: string
  hint: string
  createdAt: Date
  revokedAt: Date | null
}

/**
 * Serialises D3's first key across processes: 'petstore' in ASCII, as int8, plus one, so that
 * it is not the migrations' lock (store.ts) and a first key never waits behind a migration.
 */
const FIRST_KEY_LOCK = '8099007544119226982'

const API_KEY_COLUMNS = 'id, name, hint, created_at AS "createdAt", revoked_at AS "revokedAt"'

const KEY_SQL = {
  insertApiKey: {
    name: 'api_keys_insert',
    text: `INSERT INTO api_keys (id, name, hint, hash, created_at) VALUES ($1, $2, $3, $4, now()) RETURNING ${API_KEY_COLUMNS}`,
  },
  findActiveApiKey: {
    name: 'api_keys_find_active',
    text: 'SELECT id FROM api_keys WHERE hash = $1 AND revoked_at IS NULL',
  },
  listApiKeys: {
    name: 'api_keys_list',
    text: `SELECT ${API_KEY_COLUMNS} FROM api_keys ORDER BY created_at, id`,
  },
  revokeApiKey: {
    name: 'api_keys_revoke',
    text: 'UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL',
  },
  // After the lock, in a statement of its own: READ COMMITTED takes each statement's snapshot
  // when the statement starts, so this one sees a key that the lock's holder committed.
  insertFirstApiKey: {
    name: 'api_keys_insert_first',
    text: `INSERT INTO api_keys (id, name, hint, hash, created_at) SELECT $1, $2, $3, $4, now() WHERE NOT EXISTS (SELECT 1 FROM api_keys WHERE revoked_at IS NULL) RETURNING ${API_KEY_COLUMNS}`,
  },
  lockFirstApiKey: {
    name: 'api_keys_lock_first',
    text: `SELECT pg_advisory_xact_lock(${FIRST_KEY_LOCK})`,
  },
  countActiveApiKeys: {
    name: 'api_keys_count_active',
    text: 'SELECT count(*) AS n FROM api_keys WHERE revoked_at IS NULL',
  },
} satisfies Record<string, Statement>

function toApiKey(row: ApiKeyRow): ApiKeyRecord {
  return {
    id: row.id,
    name: row.name,
    hint: row.hint,
    createdAt: row.createdAt,
    revokedAt: row.revokedAt ?? undefined,
  }
}

export class PostgresApiKeyRepository implements ApiKeyRepository {
  readonly #db: Database

  constructor(db: Database) {
    this.#db = db
  }

  async create(key: NewApiKeyRecord): Promise<ApiKeyRecord> {
    const { rows } = await this.#db.query<ApiKeyRow>(KEY_SQL.insertApiKey, [
      key.id,
      key.name,
      key.hint,
      key.hash,
    ])
    return toApiKey(rows[0] as ApiKeyRow)
  }

  async createFirst(key: NewApiKeyRecord): Promise<ApiKeyRecord | undefined> {
    const rows = await this.#db.transaction(async (query) => {
      await query(KEY_SQL.lockFirstApiKey, [])
      return (
        await query<ApiKeyRow>(KEY_SQL.insertFirstApiKey, [key.id, key.name, key.hint, key.hash])
      ).rows
    })
    return rows[0] === undefined ? undefined : toApiKey(rows[0])
  }

  async findActiveByHash(hash: string): Promise<string | undefined> {
    const { rows } = await this.#db.query<{ id: string }>(KEY_SQL.findActiveApiKey, [hash])
    return rows[0]?.id
  }

  async list(): Promise<ApiKeyRecord[]> {
    const { rows } = await this.#db.query<ApiKeyRow>(KEY_SQL.listApiKeys, [])
    return rows.map(toApiKey)
  }

  async revoke(id: string): Promise<boolean> {
    const { rowCount } = await this.#db.query(KEY_SQL.revokeApiKey, [id])
    return rowCount > 0
  }

  async countActive(): Promise<number> {
    const { rows } = await this.#db.query<{ n: number }>(KEY_SQL.countActiveApiKeys, [])
    return rows[0]?.n ?? 0
  }
}
