// D14: an Idempotency-Key's record keeps the fingerprint of the request it answered, and a
// repeat is compared with it. Records outlive a release (24 hours, and the fleet runs two releases
// side by side), so the fingerprint of a body never changes: these are the fingerprints the
// first keyed release stored (a SHA-256 of the body with its keys sorted at every depth).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { requestFingerprint } from '../src/http/routes/idempotency.ts'

test('the fingerprint of a body is the one every release before stored', () => {
  const stored: [Parameters<typeof requestFingerprint>[0], string][] = [
    [
      { name: 'Rex', categoryId: 1, status: 'available' },
      '567e7c87ab64318d095979eea9857212ff7285866c6cad04ba9565307e05b134',
    ],
    [
      { categoryId: 9007199254740991, name: 'Ünïcode "q" \\ 🐕' },
      '9d239229746bf56d1da71911942ebb2a8fe2e3900be1fac96476b610893e1709',
    ],
    [
      { status: 'sold', name: ' x', categoryId: 42 },
      '8b8459e865a31e9b64c8a590c6c60e1296a5c0d2889d92c156793b6acd02010e',
    ],
  ]
  for (const [body, fingerprint] of stored) {
    assert.equal(requestFingerprint(body), fingerprint, JSON.stringify(body))
  }
})

test('bodies that differ only in the order of their keys are the same request', () => {
  assert.equal(
    requestFingerprint({ name: 'Rex', categoryId: 1 }),
    requestFingerprint({ categoryId: 1, name: 'Rex' }),
  )
  assert.notEqual(
    requestFingerprint({ name: 'Rex', categoryId: 1 }),
    requestFingerprint({ name: 'Rex', categoryId: 1, status: 'sold' }),
  )
})
