/**
 * Counts requests per key in fixed windows. `hit` adds one request to the key's count for the
 * window and returns the count so far. One instance counts in memory; many share Redis.
 */
export interface WindowCounter {
  hit(key: string, window: number, windowSeconds: number): Promise<number>
  close(): Promise<void>
}

/** Counts for the current window only: a new window starts every count again from zero. */
export class MemoryWindowCounter implements WindowCounter {
  #window = -1
  #counts = new Map<string, number>()

  async hit(key: string, window: number): Promise<number> {
    if (window !== this.#window) {
      this.#window = window
      this.#counts.clear()
    }
    const count = (this.#counts.get(key) ?? 0) + 1
    this.#counts.set(key, count)
    return count
  }

  async close(): Promise<void> {}
}
