// API keys on SQLite (D3): only their SHA-256 is stored.
import type { DatabaseSync, StatementSync } from 'node:sqlite'
import type { ApiKeyRecord, ApiKeyRepository, NewApiKeyRecord } from '../store.ts'
import { type Attempts, preparedOnFirstUse } from './attempts.ts'
import { type RowObject, text, textOrNull } from './rows.ts'

function toApiKey(row: RowObject): ApiKeyRecord {
  const revokedAt = textOrNull(row, 'revokedAt')
  return {
    id: text(row, 'id'),
    name: text(row, 'name'),
    hint: text(row, 'hint'),
    createdAt: new Date(text(row, 'createdAt')),
    revokedAt: revokedAt === null ? undefined : new Date(revokedAt),
  }
}

export class SqliteApiKeyRepository implements ApiKeyRepository {
  readonly #attempts: Attempts
  readonly #insert: () => StatementSync
  readonly #findActive: () => StatementSync
  readonly #list: () => StatementSync
  readonly #revoke: () => StatementSync
  readonly #countActive: () => StatementSync
  readonly #insertFirst: () => StatementSync

  constructor(db: DatabaseSync, attempts: Attempts) {
    this.#attempts = attempts
    this.#insert = preparedOnFirstUse(
      db,
      'INSERT INTO api_keys (id, name, hint, hash, created_at) VALUES (?, ?, ?, ?, ?)',
    )
    this.#findActive = preparedOnFirstUse(
      db,
      'SELECT id FROM api_keys WHERE hash = ? AND revoked_at IS NULL',
    )
    this.#list = preparedOnFirstUse(
      db,
      'SELECT id, name, hint, created_at AS createdAt, revoked_at AS revokedAt FROM api_keys ORDER BY created_at, id',
    )
    this.#revoke = preparedOnFirstUse(
      db,
      'UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL',
    )
    this.#countActive = preparedOnFirstUse(
      db,
      'SELECT count(*) AS n FROM api_keys WHERE revoked_at IS NULL',
    )
    // One statement is one transaction, and SQLite lets one writer at a time write from the
    // latest state: a second process's insert sees the first's key and inserts nothing.
    this.#insertFirst = preparedOnFirstUse(
      db,
      'INSERT INTO api_keys (id, name, hint, hash, created_at) SELECT ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM api_keys WHERE revoked_at IS NULL)',
    )
  }

  async create(key: NewApiKeyRecord): Promise<ApiKeyRecord> {
    const createdAt = new Date()
    await this.#attempts.write(() =>
      this.#insert().run(key.id, key.name, key.hint, key.hash, createdAt.toISOString()),
    )
    return { id: key.id, name: key.name, hint: key.hint, createdAt }
  }

  async createFirst(key: NewApiKeyRecord): Promise<ApiKeyRecord | undefined> {
    const createdAt = new Date()
    const { changes } = await this.#attempts.write(() =>
      this.#insertFirst().run(key.id, key.name, key.hint, key.hash, createdAt.toISOString()),
    )
    return Number(changes) === 0
      ? undefined
      : { id: key.id, name: key.name, hint: key.hint, createdAt }
  }

  async findActiveByHash(hash: string): Promise<string | undefined> {
    const row = await this.#attempts.read(() => this.#findActive().get(hash))
    return row === undefined ? undefined : String(row.id)
  }

  async list(): Promise<ApiKeyRecord[]> {
    const rows = await this.#attempts.read(() => this.#list().all())
    return rows.map(toApiKey)
  }

  async revoke(id: string): Promise<boolean> {
    const revokedAt = new Date().toISOString()
    const { changes } = await this.#attempts.write(() => this.#revoke().run(revokedAt, id))
    return Number(changes) > 0
  }

  async countActive(): Promise<number> {
    return Number((await this.#attempts.read(() => this.#countActive().get()))?.n)
  }
}
