// D16: a database that fails is said once in the log, not once per request. Both engines report
// here: each failure that becomes a 503 (StoreUnavailableError), and each operation that shows
// the database works again (a commit; for PostgreSQL, any answer). outage-log.ts turns that into
// one line when the outage starts, a reminder a minute with the count, one line when it ends.
import { systemClock } from '../clock.ts'
import { OutageLog, type OutageLogger, type OutageMessages } from '../outage-log.ts'
import { type StoreObserver, type StoreUnavailableError, unobserved } from './store.ts'

const DATABASE_OUTAGE: OutageMessages = {
  level: 'error',
  started: 'the database fails; requests that need it are answered 503 unavailable',
  continuing: 'the database still fails; requests that need it are answered 503 unavailable',
  ended: 'the database works again',
  countField: 'failedOperations',
}

const silent: OutageLogger = { error() {}, warn() {}, info() {} }

export class StoreOutages {
  readonly #outages = new OutageLog(systemClock, DATABASE_OUTAGE)
  #log: OutageLogger = silent
  #observer: StoreObserver = unobserved
  /** Whether the last operation failed: what the observer was last told (D17). */
  #failing = false

  logTo(log: OutageLogger): void {
    this.#log = log
  }

  /** D17: told when an outage starts and ends, as the log is (the unavailable gauge). */
  observe(observer: StoreObserver): void {
    this.#observer = observer
  }

  /** `count` operations failed with `err`; logged with its cause (the driver's error). */
  failed(err: StoreUnavailableError, count = 1): void {
    this.#outages.failed(this.#log, err.cause ?? err, count, { reason: err.reason })
    this.#turn(true)
  }

  succeeded(): void {
    this.#outages.succeeded(this.#log)
    this.#turn(false)
  }

  #turn(failing: boolean): void {
    if (failing === this.#failing) return
    this.#failing = failing
    this.#observer.unavailable?.(failing)
  }
}
