// D14: expired Idempotency-Key records are deleted in the background, in small batches (each its
// own short transaction, so a backlog never holds a lock for long), with a turn of the event loop
// between batches so that requests are served meanwhile. An expired record that is not purged
// yet is already treated as absent by the store; the purge only keeps the table small.
import type { Clock } from '../clock.ts'
import type { PetRepository } from './store.ts'

/** How often a round of purging starts. */
export const PURGE_INTERVAL_MS = 60_000
/** Records deleted per transaction. */
export const PURGE_BATCH_SIZE = 500

export interface IdempotencyPurgeOptions {
  pets: Pick<PetRepository, 'purgeIdempotencyRecords'>
  clock: Clock
  ttlSeconds: number
  intervalMs?: number
  batchSize?: number
}

export class IdempotencyPurge {
  readonly #options: Required<IdempotencyPurgeOptions>
  #timer: NodeJS.Timeout | undefined
  #round: Promise<number> | undefined
  #stopped = false

  constructor(options: IdempotencyPurgeOptions) {
    this.#options = { intervalMs: PURGE_INTERVAL_MS, batchSize: PURGE_BATCH_SIZE, ...options }
  }

  start(): void {
    this.#timer = setInterval(() => {
      this.#round ??= this.runOnce().finally(() => {
        this.#round = undefined
      })
    }, this.#options.intervalMs)
    // The purge never keeps a process alive on its own.
    this.#timer.unref()
  }

  /**
   * One round: batches until one comes back short. Returns how many records it deleted. A
   * failing store ends the round; the store reports its outages itself (outages.ts), and the
   * next round tries again.
   */
  async runOnce(): Promise<number> {
    const { pets, clock, ttlSeconds, batchSize } = this.#options
    let deleted = 0
    while (!this.#stopped) {
      const expiredAt = new Date(clock.now() - ttlSeconds * 1000)
      let n: number
      try {
        n = await pets.purgeIdempotencyRecords(expiredAt, batchSize)
      } catch {
        break
      }
      deleted += n
      if (n < batchSize) break
      await new Promise((resolve) => setImmediate(resolve))
    }
    return deleted
  }

  /** Stops the timer and waits for a round in progress to finish its batch. */
  async stop(): Promise<void> {
    this.#stopped = true
    clearInterval(this.#timer)
    await this.#round
  }
}
