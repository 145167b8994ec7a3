// D3: failed authentications are limited per client address (OWASP API Security Top 10 2023,
// API2 and API4). Each 401 for an unknown key counts against the address it came from, in fixed
// windows of one minute like the request budget (D12): in memory for one process, in Redis when
// REDIS_URL is set, so the fleet shares the count. Once an address reaches the limit it is
// refused, in this process, until its window ends: the auth step then answers 429 without asking
// the store for any key it does not already know valid (plugins/auth.ts).
//
// Each address's count, as the counter last gave it to this process, is kept here, with the
// look-ups of unknown keys it has in flight, rather than read from the counter on every request:
// a request with a valid key pays nothing for the limit, and another instance learns of a
// refused address at the address's next failure there (the shared count is already past the
// limit).
//
// The counts kept here are bounded by addresses a window: past the bound the address that failed
// least recently is forgotten, in constant time whatever the churn (an LRUCache, as in
// keys/key-cache.ts, which says why not a Map).
//
// Fail open, as the request budget does: a counter that fails lets the failure go uncounted.
import { isIPv4, isIPv6 } from 'node:net'
import { LRUCache } from 'lru-cache'
import type { Clock } from '../clock.ts'
import { OutageLog, type OutageLogger, type OutageMessages } from '../outage-log.ts'
import type { WindowCounter } from './counter.ts'

export interface AuthFailureLimitOptions {
  /** Failed authentications a window per address; the address is refused from this many on. */
  limit: number
  windowSeconds: number
  counter: WindowCounter
  clock: Clock
  /** Addresses whose counts are kept in this process a window, at most; default 100,000. */
  maxAddresses?: number
  /** Told when the counter fails (failures go uncounted) and when it answers again (metrics). */
  health?: CounterHealth
}

/** An address's count as the counter gave it, and the window it is of. */
interface Counted {
  readonly window: number
  readonly count: number
}

/** Whether the counter is failing open, for a gauge (observability/metrics.ts). */
export interface CounterHealth {
  failingOpen(failing: boolean): void
}

/** The counts' namespace in Redis: `<prefix>authfail:60:<window>:<address>` (redis.ts). */
export const AUTH_FAILURES_NAMESPACE = 'authfail'

/** How an outage of the counter reads in the log. */
export const FAILURE_COUNTER_OUTAGE: OutageMessages = {
  level: 'warn',
  started:
    'failed-authentication counter unreachable; failures are not counted meanwhile (fail open)',
  continuing: 'failed-authentication counter still unreachable; failures are not counted',
  ended: 'failed-authentication counter reachable again; failed authentications are limited again',
  countField: 'failuresNotCounted',
}

export class AuthFailureLimit {
  readonly limit: number
  readonly windowSeconds: number
  readonly #windowMs: number
  readonly #counter: WindowCounter
  readonly #clock: Clock
  readonly #outages: OutageLog
  readonly #health: CounterHealth | undefined
  /**
   * Each address's count as the counter last gave it, the last counted newest. A new window
   * empties it in effect rather than by clear(), which walks every entry (at the bound, a pause
   * once a window): a count of an earlier window counts as none, and is older than every count of
   * this one, so the earlier window's are the first forgotten. Made at the first failure: an
   * LRUCache reserves room for its bound when it is made, which an instance that never sees a
   * failure (and every app a test builds) need not pay for.
   */
  #counted: LRUCache<string, Counted> | undefined
  readonly #maxAddresses: number
  /**
   * Look-ups of unknown keys in flight, by address: each may yet fail, so each is counted until
   * it has, or else a client's concurrent guesses would all pass the check before the first
   * failure is counted.
   */
  readonly #lookingUp = new Map<string, number>()
  #window = -1

  constructor({
    limit,
    windowSeconds,
    counter,
    clock,
    maxAddresses,
    health,
  }: AuthFailureLimitOptions) {
    this.limit = limit
    this.windowSeconds = windowSeconds
    this.#windowMs = windowSeconds * 1000
    this.#counter = counter
    this.#clock = clock
    this.#maxAddresses = maxAddresses ?? 100_000
    this.#outages = new OutageLog(clock, FAILURE_COUNTER_OUTAGE)
    this.#health = health
  }

  /** Seconds until the address may try again, or undefined when it is not refused. */
  refusedFor(address: string | undefined): number | undefined {
    const now = this.#clock.now()
    this.#enter(Math.floor(now / this.#windowMs))
    const key = addressKey(address)
    const failures = this.#countedNow(key) + (this.#lookingUp.get(key) ?? 0)
    return failures < this.limit ? undefined : this.#secondsToReset(now)
  }

  /** A look-up of an unknown key from `address` starts; call what it returns once it is over. */
  lookingUp(address: string | undefined): () => void {
    const key = addressKey(address)
    this.#lookingUp.set(key, (this.#lookingUp.get(key) ?? 0) + 1)
    return () => {
      const left = (this.#lookingUp.get(key) ?? 1) - 1
      if (left === 0) this.#lookingUp.delete(key)
      else this.#lookingUp.set(key, left)
    }
  }

  /** Counts one failed authentication from `address`; resolves once counted (or not, failing open). */
  async failed(address: string | undefined, log: OutageLogger): Promise<void> {
    const key = addressKey(address)
    const window = Math.floor(this.#clock.now() / this.#windowMs)
    let count: number
    try {
      count = await this.#counter.hit(key, window, this.windowSeconds)
    } catch (err) {
      this.#outages.failed(log, err)
      this.#health?.failingOpen(true)
      return
    }
    this.#outages.succeeded(log)
    this.#health?.failingOpen(false)
    this.#enter(window)
    if (window !== this.#window) return // the window ended while counting
    // Counts of one address may come back out of order; the highest is the latest.
    // Set anew, it is the newest; past the bound the oldest is forgotten.
    const counted = Math.max(count, this.#countedNow(key))
    this.#counted ??= new LRUCache({ max: this.#maxAddresses })
    this.#counted.set(key, { window, count: counted })
  }

  #enter(window: number): void {
    if (window > this.#window) this.#window = window
  }

  /** The address's count in the current window, as last given. */
  #countedNow(key: string): number {
    const counted = this.#counted?.peek(key)
    return counted?.window === this.#window ? counted.count : 0
  }

  #secondsToReset(now: number): number {
    return Math.ceil(((this.#window + 1) * this.#windowMs - now) / 1000)
  }
}

/**
 * What one client is counted as: an IPv4 address, or an IPv6 address's /64 prefix, since one
 * host is commonly given a whole /64 (RFC 6177, RFC 7421) and could otherwise take a new address
 * for every attempt. An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, in any of its spellings)
 * is the IPv4 address. A port a balancer wrote is already gone (client-address.ts); anything
 * else that is not an address (or no address at all, for a peer already gone) is counted as it
 * is written.
 */
export function addressKey(address: string | undefined): string {
  if (address === undefined) return ''
  if (isIPv4(address)) return address
  const bare = (address.split('%')[0] as string).toLowerCase() // without a zone (`fe80::1%eth0`)
  if (!isIPv6(bare)) return address
  const groups = ipv6Groups(bare)
  if (groups.slice(0, 5).every((group) => group === 0) && groups[5] === 0xffff) {
    const [high, low] = [groups[6] as number, groups[7] as number]
    return [high >> 8, high & 0xff, low >> 8, low & 0xff].join('.')
  }
  return `${groups
    .slice(0, 4)
    .map((group) => group.toString(16))
    .join(':')}::/64`
}

/** The eight 16-bit groups of a valid IPv6 address (net.isIPv6), an embedded IPv4 as two. */
function ipv6Groups(address: string): number[] {
  const groupsOf = (part: string | undefined): number[] =>
    part === undefined || part === ''
      ? []
      : part.split(':').flatMap((group) => {
          if (!group.includes('.')) return [Number.parseInt(group, 16)]
          const [a, b, c, d] = group.split('.').map(Number) as [number, number, number, number]
          return [(a << 8) | b, (c << 8) | d]
        })
  const [head, tail] = address.split('::')
  const before = groupsOf(head)
  const after = groupsOf(tail)
  const missing = 8 - before.length - after.length
  return [...before, ...Array<number>(missing).fill(0), ...after]
}
