// DATABASE_URL and DATABASE_POOL_SIZE (D9): PostgreSQL locations are validated at start.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { loadConfig } from '../src/config.ts'

describe('DATABASE_URL for PostgreSQL', () => {
  test('postgres:// and postgresql:// with DATABASE_POOL_SIZE', () => {
    const url = 'postgresql://app:secret@db.internal:6432/petstore?sslmode=require'
    assert.deepEqual(loadConfig({ DATABASE_URL: url, DATABASE_POOL_SIZE: '25' }).database, {
      engine: 'postgres',
      url,
      poolSize: 25,
      pooler: 'none',
    })
    assert.equal(loadConfig({ DATABASE_URL: 'postgres://db/petstore' }).database.engine, 'postgres')
  })

  test('the pool size defaults to 10 and must be 1 to 1000', () => {
    const database = loadConfig({ DATABASE_URL: 'postgres://db/petstore' }).database
    assert.equal(database.engine === 'postgres' && database.poolSize, 10)
    for (const bad of ['0', '1001', 'ten', '-1']) {
      assert.throws(
        () => loadConfig({ DATABASE_URL: 'postgres://db/petstore', DATABASE_POOL_SIZE: bad }),
        /DATABASE_POOL_SIZE must be an integer from 1 to 1000/,
      )
    }
  })

  test('DATABASE_POOLER is none (direct) unless transaction (D19)', () => {
    const pooler = (value?: string) => {
      const database = loadConfig({
        DATABASE_URL: 'postgres://db/petstore',
        ...(value === undefined ? {} : { DATABASE_POOLER: value }),
      }).database
      return database.engine === 'postgres' ? database.pooler : undefined
    }
    assert.equal(pooler(), 'none')
    assert.equal(pooler('transaction'), 'transaction')
    assert.throws(() => pooler('session'), /DATABASE_POOLER must be one of none, transaction/)
  })

  test('a malformed URL is one clear line that does not repeat the password', () => {
    for (const bad of [
      'postgres://app:secret@/petstore',
      'postgres://app:secret@db',
      'postgres://',
    ]) {
      assert.throws(
        () => loadConfig({ DATABASE_URL: bad }),
        (err: Error) =>
          /DATABASE_URL is not a valid PostgreSQL URL/.test(err.message) &&
          !err.message.includes('secret') &&
          !err.message.includes('\n'),
      )
    }
  })
})
