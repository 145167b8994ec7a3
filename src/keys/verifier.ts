// Decides whether a bearer token is a valid API key (D2, D3). Keys from PETSTORE_API_KEYS are
// held in memory. Keys made by the CLI, always structured (petstore_<env>_…), are looked up by
// hash in the store, and the answer is believed for PETSTORE_KEY_CACHE_MS (key-cache.ts): a
// verified key costs no round trip, and a revocation or a new key holds within that bound on
// every instance. No other token ever reaches the store.
//
// In two steps, so that the auth step can refuse a client over its failed-authentication limit
// between them, having asked nothing of the store (plugins/auth.ts).

import type { Clock } from '../clock.ts'
import {
  type DeploymentEnv,
  hashApiKey,
  type ParsedApiKey,
  parseApiKey,
} from '../contract/api-key.ts'
import type { ApiKeyRepository, KeyLookupObserver } from '../store/store.ts'
import { KeyCache } from './key-cache.ts'

/**
 * A refusal is `unknown` when the token could have been a key and is not one (not among the
 * environment's keys, or not active in the store), as against one refused by its form alone
 * (malformed, of the other environment, empty): only the former are guesses (D3).
 */
export type KeyCheck =
  | { valid: true; keyId: string }
  | { valid: false; reason: string; unknown?: true }

/** A token only the store can judge: its hash, and whether this process has seen it valid. */
export interface StoreLookup {
  readonly valid: undefined
  readonly hash: string
  /** Seen valid before (the answer has outlived the bound): a real key, worth re-checking. */
  readonly seenValid: boolean
  /** The store is being asked about it already: this request waits for that answer. */
  readonly asked: boolean
}

export interface KeyVerifier {
  /** What memory alone can say: valid, refused, or that only the store can tell. */
  fromMemory(token: string): KeyCheck | StoreLookup
  /** The store's answer for what memory left open, remembered for the bound. */
  fromStore(lookup: StoreLookup): Promise<KeyCheck>
}

const MONOTONIC: Clock = { now: () => performance.now() }

const NOT_VALID: KeyCheck = {
  valid: false,
  reason: 'the API key is not valid or has been revoked',
  unknown: true,
}

export interface KeyVerifierOptions {
  env: DeploymentEnv
  apiKeys: ApiKeyRepository
  /** Keys from the environment, as given. */
  bootstrapKeys: readonly string[]
  /** PETSTORE_KEY_CACHE_MS; 0 (the default here) asks the store every time. */
  cacheMs?: number
  clock?: Clock
  /** Entries in each of the cache's maps (key-cache.ts). */
  cacheEntries?: number
  observer?: KeyLookupObserver
}

export function createKeyVerifier(options: KeyVerifierOptions): KeyVerifier {
  const { env, apiKeys, observer } = options
  // The id of an environment key is derived from its hash, so every instance gives the same
  // key the same id (rate-limit counters are shared by id). Kept by the key itself, like the
  // configuration that holds them, so that an environment key costs one Map look-up, not a
  // parse and a SHA-256 per request (docs/benchmarks.md has what that cost). Keys this
  // deployment would refuse anyway (corrupt, or of the other environment) are left out.
  const fromEnvironment = new Map(
    options.bootstrapKeys
      .filter((key) => acceptable(parseApiKey(key), env))
      .map((key) => [key, environmentKeyId(key)] as const),
  )
  // Ages are measured on a monotonic clock: a wall clock stepped back would make old answers
  // young again.
  const clock = options.clock ?? MONOTONIC
  const cache = new KeyCache({
    maxAgeMs: options.cacheMs ?? 0,
    clock,
    ...(options.cacheEntries === undefined ? {} : { maxEntries: options.cacheEntries }),
  })
  // One question to the store per hash at a time: when a busy key's answer expires, the
  // requests that find it stale wait for one look-up rather than each making their own, as long
  // as that question is younger than the bound (a slow answer is not shared past it).
  const asking = new Map<string, { askedAt: number; answer: Promise<KeyCheck> }>()

  /** Whether a question about `hash` is in flight and young enough to share. */
  function askingNow(hash: string): boolean {
    const pending = asking.get(hash)
    return pending !== undefined && cache.isFresh(pending.askedAt)
  }

  async function ask(hash: string, askedAt: number): Promise<KeyCheck> {
    const keyId = await apiKeys.findActiveByHash(hash)
    observer?.lookedUp(keyId !== undefined)
    if (keyId === undefined) {
      cache.rememberRefused(hash, askedAt)
      return NOT_VALID
    }
    cache.rememberValid(hash, keyId, askedAt)
    return { valid: true, keyId }
  }

  return {
    fromMemory(token) {
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
      const hash = hashApiKey(token)
      const seen = cache.seenValid(hash)
      if (seen !== undefined && cache.isFresh(seen.checkedAt)) {
        return { valid: true, keyId: seen.keyId }
      }
      if (cache.refusedRecently(hash)) return NOT_VALID
      return { valid: undefined, hash, seenValid: seen !== undefined, asked: askingNow(hash) }
    },

    fromStore({ hash }) {
      const pending = asking.get(hash)
      if (pending !== undefined && askingNow(hash)) return pending.answer
      // The answer is as old as the question: a revocation committed while the query ran may
      // not be in it, so the bound runs from before the query.
      const askedAt = clock.now()
      const answer: Promise<KeyCheck> = ask(hash, askedAt).finally(() => {
        if (asking.get(hash)?.answer === answer) asking.delete(hash)
      })
      asking.set(hash, { askedAt, answer })
      return answer
    },
  }
}

/** Both steps: memory, then the store if memory cannot tell (the CLI and tests). */
export function verifyKey(verifier: KeyVerifier, token: string): KeyCheck | Promise<KeyCheck> {
  const answer = verifier.fromMemory(token)
  return answer.valid === undefined ? verifier.fromStore(answer) : answer
}

/** The id of a key from PETSTORE_API_KEYS: what logs and rate limits name it by, never the key. */
export function environmentKeyId(key: string): string {
  return `env_${hashApiKey(key).slice(0, 12)}`
}

/** Not corrupt, and not a key of the other environment. */
function acceptable(parsed: ParsedApiKey, env: DeploymentEnv): boolean {
  return parsed.kind === 'opaque' || (parsed.kind === 'structured' && parsed.env === env)
}
