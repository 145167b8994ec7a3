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
 */
export class MemoryWindowCounter implements WindowCounter {
  readonly #maxKeys: number
  #window = -1
  #counts = new Map<string, number>()

  constructor(maxKeys = Number.POSITIVE_INFINITY) {
    this.#maxKeys = maxKeys
  }

  async hit(key: string, window: number): Promise<number> {
    if (window !== this.#window) {
      this.#window = window
      this.#counts.clear()
    }
    const count = (this.#counts.get(key) ?? 0) + 1
    this.#counts.set(key, count)
    if (count === 1 && this.#counts.size > this.#maxKeys) {
      const oldest = this.#counts.keys().next()
      if (!oldest.done) this.#counts.delete(oldest.value)
    }
    return count
  }

  async close(): Promise<void> {}
}
