/** Time as the app sees it; tests inject their own to cross the sunset or a rate-limit window. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number
}

export const systemClock: Clock = { now: () => Date.now() }
