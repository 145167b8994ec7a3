// While something the service depends on fails (the rate-limit counter in Redis, the database),
// every request would have a failure to report; logging each would flood the log exactly when an
// operator needs it readable (a full disk once gave 8,911 stack traces in 2 s). So this logs
// state changes: one line when the failure starts (with its cause), a reminder at most once an
// interval while it lasts (with a count), and one line when it works again. A dependency that
// flaps within an interval yields at most one warning and one recovery line per interval.
import type { Clock } from './clock.ts'

/** The part of a pino/Fastify logger this needs. */
export interface OutageLogger {
  error(fields: object, message: string): void
  warn(fields: object, message: string): void
  info(fields: object, message: string): void
}

/** What one kind of outage is called in the log. */
export interface OutageMessages {
  /** The level of the start and the reminders; the end is always `info`. */
  level: 'warn' | 'error'
  started: string
  continuing: string
  ended: string
  /** The field that counts what failed meanwhile, e.g. `requestsLetThrough`. */
  countField: string
}

export class OutageLog {
  readonly #clock: Clock
  readonly #messages: OutageMessages
  readonly #intervalMs: number
  #failing = false
  #lastWarningAt = Number.NEGATIVE_INFINITY
  /** Whether this outage was announced, so that its end is announced too. */
  #announced = false
  #since = 0
  #count = 0

  constructor(clock: Clock, messages: OutageMessages, intervalMs = 60_000) {
    this.#clock = clock
    this.#messages = messages
    this.#intervalMs = intervalMs
  }

  /** `count` more operations failed with `err`; `fields` are added to the line, if one is due. */
  failed(log: OutageLogger, err: unknown, count = 1, fields: object = {}): void {
    const now = this.#clock.now()
    if (!this.#failing) {
      this.#failing = true
      this.#since = now
      this.#count = 0
    }
    this.#count += count
    if (now - this.#lastWarningAt < this.#intervalMs) return
    const { level, started, continuing, countField } = this.#messages
    log[level](
      { ...fields, err, [countField]: this.#count, failingForMs: now - this.#since },
      this.#announced ? continuing : started,
    )
    this.#lastWarningAt = now
    this.#announced = true
  }

  /** It worked: the outage, if there was one, is over. */
  succeeded(log: OutageLogger): void {
    if (!this.#failing) return
    this.#failing = false
    if (!this.#announced) return
    this.#announced = false
    log.info(
      { [this.#messages.countField]: this.#count, failedForMs: this.#clock.now() - this.#since },
      this.#messages.ended,
    )
  }
}
