// D3: what the store said of a key's hash, believed for a bounded time. A key verified within
// the bound costs no round trip; one refused within it costs none either. Past the bound the
// store is asked again, so a revocation or a new key holds within the bound on every instance.
//
// Both maps are bounded in entries, whatever clients send: a full map forgets its oldest entry
// (every answer from the store is inserted anew; reading an entry does not make it newer), so a
// flood of distinct tokens costs at most the bound in memory and pushes out only refusals and
// keys not asked about for longest. Each is an LRUCache read with peek(), not a Map whose first
// key is the oldest: a Map's iteration passes over every entry deleted from its front since its
// table was last rebuilt, so forgetting the oldest that way costs more the more a flood churns
// it (issue 53; docs/benchmarks.md, "Failed authentications from many addresses").
import { LRUCache } from 'lru-cache'
import type { Clock } from '../clock.ts'

export interface KeyCacheOptions {
  /** How long an answer from the store is believed (ms); 0: never, ask every time. */
  maxAgeMs: number
  clock: Clock
  /** Entries in each map; default 10,000. Room for them all is taken at once (lru-cache). */
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
  readonly #valid: LRUCache<string, SeenValid>
  /** The hash refused, and when. */
  readonly #refused: LRUCache<string, number>

  constructor({ maxAgeMs, clock, maxEntries = 10_000 }: KeyCacheOptions) {
    this.#maxAgeMs = maxAgeMs
    this.#clock = clock
    this.#valid = new LRUCache({ max: maxEntries })
    this.#refused = new LRUCache({ max: maxEntries })
  }

  /**
   * The key with this hash as last seen valid, fresh or not; undefined if never seen or since
   * refused. A stale entry still says the key was real, which a refused address may re-check.
   */
  seenValid(hash: string): SeenValid | undefined {
    return this.#valid.peek(hash)
  }

  /** Whether an entry from the store is young enough to be believed (never one from the future). */
  isFresh(checkedAt: number): boolean {
    const age = this.#clock.now() - checkedAt
    return age >= 0 && age < this.#maxAgeMs
  }

  /** Whether the store refused this hash within the bound. */
  refusedRecently(hash: string): boolean {
    const refusedAt = this.#refused.peek(hash)
    return refusedAt !== undefined && this.isFresh(refusedAt)
  }

  /** `checkedAt`: when the store was asked (default now). */
  rememberValid(hash: string, keyId: string, checkedAt = this.#clock.now()): void {
    if (this.#knowsLaterThan(hash, checkedAt)) return
    this.#refused.delete(hash)
    this.#valid.set(hash, { keyId, checkedAt })
  }

  rememberRefused(hash: string, refusedAt = this.#clock.now()): void {
    if (this.#knowsLaterThan(hash, refusedAt)) return
    this.#valid.delete(hash)
    // With no bound there is nothing to believe later: keep nothing.
    if (this.#maxAgeMs > 0) this.#refused.set(hash, refusedAt)
  }

  /** A slow answer arriving after a later one must not replace it. */
  #knowsLaterThan(hash: string, at: number): boolean {
    const seen = this.#valid.peek(hash)
    const refusedAt = this.#refused.peek(hash)
    return (
      (seen !== undefined && seen.checkedAt > at) || (refusedAt !== undefined && refusedAt > at)
    )
  }

  /** Entries held, for tests of the bound. */
  get size(): { valid: number; refused: number } {
    return { valid: this.#valid.size, refused: this.#refused.size }
  }
}
