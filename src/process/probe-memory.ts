// D20: what the API's thread tells the probe thread (probe-thread.ts), in memory both share, so
// that reading it never waits for the API's event loop: when that loop last turned, when it last
// checked readiness, and whether it drains or sheds now. Times are process.hrtime's, in
// nanoseconds: monotonic, and the same clock in every thread of the process.

/** Slots of the BigInt64Array: times. */
const HEARTBEAT = 0
const READINESS_CHECKED = 1
/** Slots of the Int32Array that follows: flags. */
const DRAINING = 0
const SHEDDING = 1

const TIMES = 2
const FLAGS = 2

/** The memory, made by the API's thread and handed to the probe thread at its start. */
export function probeMemory(): SharedArrayBuffer {
  return new SharedArrayBuffer(TIMES * 8 + FLAGS * 4)
}

/** The times, then the flags: the one layout both threads read the memory with. */
function views(memory: SharedArrayBuffer): { times: BigInt64Array; flags: Int32Array } {
  return {
    times: new BigInt64Array(memory, 0, TIMES),
    flags: new Int32Array(memory, TIMES * 8, FLAGS),
  }
}

/** What the API's thread writes. */
export class ProbeWriter {
  readonly #times: BigInt64Array
  readonly #flags: Int32Array

  constructor(memory: SharedArrayBuffer) {
    const { times, flags } = views(memory)
    this.#times = times
    this.#flags = flags
  }

  beat(): void {
    Atomics.store(this.#times, HEARTBEAT, process.hrtime.bigint())
  }

  readinessChecked(): void {
    Atomics.store(this.#times, READINESS_CHECKED, process.hrtime.bigint())
  }

  flags(draining: boolean, shedding: boolean): void {
    Atomics.store(this.#flags, DRAINING, draining ? 1 : 0)
    Atomics.store(this.#flags, SHEDDING, shedding ? 1 : 0)
  }
}

/** What the probe thread reads; ages in milliseconds (never-written reads as very old). */
export class ProbeReader {
  readonly #times: BigInt64Array
  readonly #flags: Int32Array

  constructor(memory: SharedArrayBuffer) {
    const { times, flags } = views(memory)
    this.#times = times
    this.#flags = flags
  }

  #ageMs(slot: number): number {
    return Number(process.hrtime.bigint() - Atomics.load(this.#times, slot)) / 1e6
  }

  heartbeatAgeMs(): number {
    return this.#ageMs(HEARTBEAT)
  }

  readinessAgeMs(): number {
    return this.#ageMs(READINESS_CHECKED)
  }

  draining(): boolean {
    return Atomics.load(this.#flags, DRAINING) === 1
  }

  shedding(): boolean {
    return Atomics.load(this.#flags, SHEDDING) === 1
  }
}
