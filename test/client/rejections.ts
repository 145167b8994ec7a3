// What a call that must fail rejected with, for the SDK's tests.
import assert from 'node:assert/strict'
import { PetstoreError } from '../../client/src/index.ts'

export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  } catch (err) {
    return err
  }
  assert.fail('expected the call to fail')
}

export async function petstoreError(promise: Promise<unknown>): Promise<PetstoreError> {
  const err = await rejection(promise)
  assert.ok(err instanceof PetstoreError, `expected a PetstoreError, got ${String(err)}`)
  return err
}
