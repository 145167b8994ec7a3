// Decides whether a bearer token is a valid API key (D2, D3): keys from PETSTORE_API_KEYS are
// held in memory; keys made by the CLI, always structured (petstore_<env>_…), are looked up by
// hash in the store, so a revocation takes effect on the next request, in every instance. No
// other token ever reaches the store.

import {
  type DeploymentEnv,
  hashApiKey,
  type ParsedApiKey,
  parseApiKey,
} from '../contract/api-key.ts'
import type { ApiKeyRepository } from '../store/store.ts'

export type KeyCheck = { valid: true; keyId: string } | { valid: false; reason: string }

/** Synchronous for keys from the environment; a promise when the store has to be asked. */
export type KeyVerifier = (token: string) => KeyCheck | Promise<KeyCheck>

const NOT_VALID: KeyCheck = {
  valid: false,
  reason: 'the API key is not valid or has been revoked',
}

export interface KeyVerifierOptions {
  env: DeploymentEnv
  apiKeys: ApiKeyRepository
  /** Keys from the environment, as given. */
  bootstrapKeys: readonly string[]
}

export function createKeyVerifier({
  env,
  apiKeys,
  bootstrapKeys,
}: KeyVerifierOptions): KeyVerifier {
  // The id of an environment key is derived from its hash, so every instance gives the same
  // key the same id (rate-limit counters are shared by id). Kept by the key itself, like the
  // configuration that holds them, so that an environment key costs one Map look-up, not a
  // parse and a SHA-256 per request (docs/benchmarks.md has what that cost). Keys this
  // deployment would refuse anyway (corrupt, or of the other environment) are left out.
  const fromEnvironment = new Map(
    bootstrapKeys
      .filter((key) => acceptable(parseApiKey(key), env))
      .map((key) => [key, environmentKeyId(key)] as const),
  )

  return function verify(token) {
    const environmentKeyId = fromEnvironment.get(token)
    if (environmentKeyId !== undefined) return { valid: true, keyId: environmentKeyId }
    const parsed = parseApiKey(token)
    if (parsed.kind === 'corrupt') return { valid: false, reason: 'the API key is malformed' }
    // The store holds only keys that `petstore keys create` (or the first start) made, all
    // structured: any other token is refused without a hash or a query.
    if (parsed.kind === 'opaque') return NOT_VALID
    if (parsed.env !== env) {
      return { valid: false, reason: `the API key is a ${parsed.env} key; this is ${env}` }
    }
    // Asked on every request, not cached: a revocation holds from the next request, everywhere.
    return apiKeys
      .findActiveByHash(hashApiKey(token))
      .then((keyId) => (keyId === undefined ? NOT_VALID : { valid: true, keyId }))
  }
}

/** The id of a key from PETSTORE_API_KEYS: what logs and rate limits name it by, never the key. */
export function environmentKeyId(key: string): string {
  return `env_${hashApiKey(key).slice(0, 12)}`
}

/** Not corrupt, and not a key of the other environment. */
function acceptable(parsed: ParsedApiKey, env: DeploymentEnv): boolean {
  return parsed.kind === 'opaque' || (parsed.kind === 'structured' && parsed.env === env)
}
