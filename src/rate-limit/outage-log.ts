// While the shared counter (Redis) fails, every request would have a failure to report; logging
// each would flood the log exactly when an operator needs it readable. So this logs state
// changes: one warning when the counter starts failing, a reminder at most once an interval
// while it keeps failing, and one line when it answers again. A counter that flaps within an
// interval yields at most one warning and one recovery line per interval.
import type { Clock } from '../clock.ts'

/** The part of a pino/Fastify logger this needs. */
export interface OutageLogger {
  warn(fields: object, message: string): void
  info(fields: object, message: string): void
}

export class OutageLog {
  readonly #clock: Clock
  readonly #intervalMs: number
  #failing = false
  #lastWarningAt = Number.NEGATIVE_INFINITY
  /** Whether this outage was announced, so that its end is announced too. */
  #announced = false
  #since = 0
  #letThrough = 0

  constructor(clock: Clock, intervalMs = 60_000) {
    this.#clock = clock
    this.#intervalMs = intervalMs
  }

  /** A hit failed and its request was let through. */
  failed(log: OutageLogger, err: unknown): void {
    const now = this.#clock.now()
    if (!this.#failing) {
      this.#failing = true
      this.#since = now
      this.#letThrough = 0
    }
    this.#letThrough += 1
    if (now - this.#lastWarningAt < this.#intervalMs) return
    log.warn(
      { err, requestsLetThrough: this.#letThrough, failingForMs: now - this.#since },
      this.#announced
        ? 'rate limit counter still unreachable; requests are let through without a limit'
        : 'rate limit counter unreachable; requests are let through without a limit (fail open)',
    )
    this.#lastWarningAt = now
    this.#announced = true
  }

  /** A hit succeeded: limits apply again. */
  succeeded(log: OutageLogger): void {
    if (!this.#failing) return
    this.#failing = false
    if (!this.#announced) return
    this.#announced = false
    log.info(
      { requestsLetThrough: this.#letThrough, failedForMs: this.#clock.now() - this.#since },
      'rate limit counter reachable again; limits apply again',
    )
  }
}
