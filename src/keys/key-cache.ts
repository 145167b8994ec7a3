// D3: what the store said of a key's hash, believed for a bounded time. A key verified within
// the bound costs no round trip; one refused within it costs none either. Past the bound the
// store is asked again, so a revocation or a new key holds within the bound on every instance.
//
// Both maps are bounded in entries, whatever clients send: a full map forgets its oldest entry
// (Maps keep insertion order, and every answer from the store is inserted anew), so a flood of
// distinct tokens costs at most the bound in memory and pushes out only refusals and keys not
// asked about for longest.
import type { Clock } from '../clock.ts'

export interface KeyCacheOptions {
  /** How long an answer from the store is believed (ms); 0: never, ask every time. */
  maxAgeMs: number
  clock: Clock
  /** Entries in each map; default 10,000. */
  maxEntries?: number
}

/** A key the store said is active, and when it said so. */
export interface SeenValid {
  readonly keyId: string
  readonly checkedAt: number
}

export class KeyCache {
  readonly #maxAgeMs: number
  readonly #clock: Clock
  readonly #maxEntries: number
  readonly #valid = new Map<string, SeenValid>()
  /** The hash refused, and when. */
  readonly #refused = new Map<string, number>()

  constructor({ maxAgeMs, clock, maxEntries = 10_000 }: KeyCacheOptions) {
    this.#maxAgeMs = maxAgeMs
    this.#clock = clock
    this.#maxEntries = maxEntries
  }

  /**
   * The key with this hash as last seen valid, fresh or not; undefined if never seen or since
   * refused. A stale entry still says the key was real, which a refused address may re-check.
   */
  seenValid(hash: string): SeenValid | undefined {
    return this.#valid.get(hash)
  }

  /** Whether an entry from the store is young enough to be believed (never one from the future). */
  isFresh(checkedAt: number): boolean {
    const age = this.#clock.now() - checkedAt
    return age >= 0 && age < this.#maxAgeMs
  }

  /** Whether the store refused this hash within the bound. */
  refusedRecently(hash: string): boolean {
    const refusedAt = this.#refused.get(hash)
    return refusedAt !== undefined && this.isFresh(refusedAt)
  }

  /** `checkedAt`: when the store was asked (default now). */
  rememberValid(hash: string, keyId: string, checkedAt = this.#clock.now()): void {
    if (this.#knowsLaterThan(hash, checkedAt)) return
    this.#refused.delete(hash)
    insertBounded(this.#valid, hash, { keyId, checkedAt }, this.#maxEntries)
  }

  rememberRefused(hash: string, refusedAt = this.#clock.now()): void {
    if (this.#knowsLaterThan(hash, refusedAt)) return
    this.#valid.delete(hash)
    // With no bound there is nothing to believe later: keep nothing.
    if (this.#maxAgeMs > 0) insertBounded(this.#refused, hash, refusedAt, this.#maxEntries)
  }

  /** A slow answer arriving after a later one must not replace it. */
  #knowsLaterThan(hash: string, at: number): boolean {
    const seen = this.#valid.get(hash)
    const refusedAt = this.#refused.get(hash)
    return (
      (seen !== undefined && seen.checkedAt > at) || (refusedAt !== undefined && refusedAt > at)
    )
  }

  /** Entries held, for tests of the bound. */
  get size(): { valid: number; refused: number } {
    return { valid: this.#valid.size, refused: this.#refused.size }
  }
}

/** Set `key` as the newest entry; beyond `max` entries, forget the oldest. */
function insertBounded<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  map.delete(key)
  map.set(key, value)
  if (map.size > max) {
    const oldest = map.keys().next()
    if (!oldest.done) map.delete(oldest.value)
  }
}
