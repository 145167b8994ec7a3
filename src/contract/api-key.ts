// API key format (D3): `petstore_<env>_<32 random base62><6 base62 CRC-32>`. In the contract
// because it is what clients send and the configuration checks (PETSTORE_API_KEYS), below the
// store and keys/, which keep and check them.
// The prefix names the environment, so secret scanners can spot a leaked key and a staging key
// is refused by production; the checksum lets both tell a real key from a typo without a
// database look-up. Only the SHA-256 of a key is ever stored.
import { hash, randomBytes } from 'node:crypto'
import { crc32 } from 'node:zlib'

/** The environment a key is issued for and accepted in (PETSTORE_ENV). */
export type DeploymentEnv = 'production' | 'staging'

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
const SECRET_LENGTH = 32
const CHECKSUM_LENGTH = 6

const PREFIX: Record<DeploymentEnv, string> = {
  production: 'petstore_live_',
  staging: 'petstore_staging_',
}

/**
 * A prefix, SECRET_LENGTH then CHECKSUM_LENGTH base62 characters: a literal, as test/redos.test.ts
 * checks only those; every test that makes a key with generateApiKey() and has it accepted
 * holds the two in step.
 */
const KEY_PATTERN = /^(petstore_live_|petstore_staging_)([0-9A-Za-z]{32})([0-9A-Za-z]{6})$/

/** Uniform random base62 text: bytes ≥ 248 are dropped so that every character is equally likely. */
function randomBase62(length: number): string {
  let out = ''
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62]
    }
  }
  return out
}

function checksum(text: string): string {
  let n = crc32(text)
  let out = ''
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = BASE62[n % 62] + out
    n = Math.floor(n / 62)
  }
  return out
}

export function generateApiKey(env: DeploymentEnv): string {
  const body = PREFIX[env] + randomBase62(SECRET_LENGTH)
  return body + checksum(body)
}

export type ParsedApiKey =
  | { kind: 'structured'; env: DeploymentEnv }
  /** Has the petstore shape but the checksum does not match: a typo or a truncated copy. */
  | { kind: 'corrupt' }
  /** Anything else: an operator-supplied key from PETSTORE_API_KEYS, or garbage. */
  | { kind: 'opaque' }

export function parseApiKey(key: string): ParsedApiKey {
  const match = KEY_PATTERN.exec(key)
  if (!match) return { kind: 'opaque' }
  const [, prefix = '', secret = '', sum = ''] = match
  if (checksum(prefix + secret) !== sum) return { kind: 'corrupt' }
  return { kind: 'structured', env: prefix === PREFIX.staging ? 'staging' : 'production' }
}

export function hashApiKey(key: string): string {
  return hash('sha256', key, 'hex')
}

/** What `keys list` shows to tell keys apart: the prefix and the last four characters. */
export function keyHint(key: string): string {
  const prefix = KEY_PATTERN.exec(key)?.[1] ?? ''
  return `${prefix}…${key.slice(-4)}`
}

export function newKeyId(): string {
  return `key_${randomBase62(12)}`
}

/** The shape newKeyId() gives, the only one a stored key's id has ever had. */
export function isKeyId(text: string): boolean {
  return /^key_[0-9A-Za-z]{12}$/.test(text)
}
