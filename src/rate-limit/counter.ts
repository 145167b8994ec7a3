/**
 * Counts requests (D12) or failed authentications (D3) per key in fixed windows. `hit` adds one
 * to the key's count for the window and returns the count so far. One instance counts in memory;
 * many share Redis.
 */
export interface WindowCounter {
  hit(key: string, window: number, windowSeconds: number): Promise<number>
  close(): Promise<void>
}

/**
 * Counts for the current window only: a new window starts every count again from zero. At most
 * `maxKeys` counts are held (unbounded unless given): past it the oldest count is forgotten, so
 * counting client addresses (D3) stays bounded in memory whatever the number of addresses.
 * "Oldest" is the first counted this window: counting a key again does not move it, so the keys
 * are forgotten in the order they came, which a ring of them holds. Not a Map's first key: its
 * iteration passes over every entry deleted from its front since its table was last rebuilt, so
 * forgetting that way costs more the more a flood churns it (keys/key-cache.ts).
 */
export class MemoryWindowCounter implements WindowCounter {
  readonly #maxKeys: number
  #window = -1
  readonly #counts = new Map<string, number>()
  /**
   * Bounded: the keys in the order first counted, a ring. A slot is read only once the window has
   * counted `maxKeys` keys, every slot then written in it: the next holds the oldest.
   */
  readonly #order: string[] | undefined
  #next = 0

  constructor(maxKeys = Number.POSITIVE_INFINITY) {
    this.#maxKeys = maxKeys
    this.#order = Number.isFinite(maxKeys) ? [] : undefined
  }

  async hit(key: string, window: number): Promise<number> {
    if (window !== this.#window) {
      this.#window = window
      this.#counts.clear()
    }
    const count = (this.#counts.get(key) ?? 0) + 1
    this.#counts.set(key, count)
    if (count === 1 && this.#order !== undefined) this.#first(key, this.#order)
    return count
  }

  /** `key` is counted for the first time this window: past the bound, the oldest is forgotten. */
  #first(key: string, order: string[]): void {
    if (this.#counts.size > this.#maxKeys) this.#counts.delete(order[this.#next] as string)
    order[this.#next] = key
    this.#next = (this.#next + 1) % this.#maxKeys
  }

  async close(): Promise<void> {}
}
