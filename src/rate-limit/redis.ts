// D12: many instances share one budget per key by counting in Redis. One round trip per hit:
// a Lua script runs INCR and, on the window's first hit, EXPIRE, atomically on the server, so
// no key is ever left without an expiry and no two instances can interleave between the two.
//
// The limiter fails open (plugins/rate-limit.ts): this class only has to fail *fast*. Hence
// no offline queue (a hit while disconnected rejects at once instead of waiting), a short
// command timeout for a Redis that is slow or hung, and no resending of a hit after a
// reconnect (it may have counted already, and its request has long been answered).
import { Redis, type Result } from 'ioredis'
import type { RedisSettings } from '../config.ts'
import type { WindowCounter } from './counter.ts'

const RATE_LIMIT = 'ratelimit'

const HIT_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return count`

// ioredis's documented way to type a command added with defineCommand.
declare module 'ioredis' {
  interface RedisCommander<Context> {
    petstoreHit(key: string, ttlSeconds: number): Result<number, Context>
  }
}

export interface RedisCounterOptions extends RedisSettings {
  /** A hit that takes longer fails, and the limiter lets its request through. */
  commandTimeoutMs?: number
}

/** Reconnect delays: 50 ms doubling to at most 2 s, forever, so recovery needs no restart. */
function reconnectDelay(attempt: number): number {
  return Math.min(50 * 2 ** Math.min(attempt, 16), 2000)
}

/** The URL without its password, for logs. */
export function redactRedisUrl(raw: string): string {
  const url = new URL(raw)
  if (url.password !== '') url.password = '***'
  return url.toString()
}

export class RedisWindowCounter implements WindowCounter {
  readonly #redis: Redis
  readonly #prefix: string

  constructor(options: RedisCounterOptions) {
    this.#prefix = options.prefix
    this.#redis = new Redis(options.url, {
      enableOfflineQueue: false,
      commandTimeout: options.commandTimeoutMs ?? 200,
      // A connection that stops answering is dropped after 2 s and reconnected, rather than
      // waiting for TCP keep-alive; hits meanwhile fail in commandTimeout.
      socketTimeout: 2000,
      connectTimeout: 1000,
      retryStrategy: reconnectDelay,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      // RESP2 is what every Redis-compatible server speaks; the counter needs nothing of RESP3.
      protocol: 2,
      connectionName: 'petstore-counters',
    })
    this.#redis.defineCommand('petstoreHit', { numberOfKeys: 1, lua: HIT_SCRIPT })
    // Without a listener ioredis prints every connection error to the console. Failures reach
    // the limiter as rejected hits, and it logs them without flooding (outage-log.ts).
    this.#redis.on('error', () => {})
  }

  /** The key of one API key's count in one window: `<prefix>ratelimit:<w>:<window>:<keyId>`. */
  keyFor(keyId: string, window: number, windowSeconds: number): string {
    return this.#keyIn(RATE_LIMIT, keyId, window, windowSeconds)
  }

  async hit(keyId: string, window: number, windowSeconds: number): Promise<number> {
    return this.#hitIn(RATE_LIMIT, keyId, window, windowSeconds)
  }

  /**
   * Counts of another kind (D3's failed authentications, `authfail`), on the same connection:
   * `<prefix><namespace>:<w>:<window>:<key>`. Closing this counter closes both.
   */
  sibling(namespace: string): WindowCounter & { keyFor: RedisWindowCounter['keyFor'] } {
    return {
      keyFor: (key, window, windowSeconds) => this.#keyIn(namespace, key, window, windowSeconds),
      hit: (key, window, windowSeconds) => this.#hitIn(namespace, key, window, windowSeconds),
      close: async () => {},
    }
  }

  #keyIn(namespace: string, key: string, window: number, windowSeconds: number): string {
    return `${this.#prefix}${namespace}:${windowSeconds}:${window}:${key}`
  }

  #hitIn(namespace: string, key: string, window: number, windowSeconds: number): Promise<number> {
    // The count expires one window after the first hit, so by the end of the next window at
    // the latest: memory in Redis stays bounded by the keys active in two windows.
    return this.#redis.petstoreHit(
      this.#keyIn(namespace, key, window, windowSeconds),
      windowSeconds,
    )
  }

  /**
   * Resolves true once connected; false on the first connection error or after `timeoutMs`.
   * Either way the client keeps reconnecting in the background.
   */
  whenReady(timeoutMs: number): Promise<boolean> {
    if (this.#redis.status === 'ready') return Promise.resolve(true)
    return new Promise((resolve) => {
      const settle = (ready: boolean) => () => {
        clearTimeout(timer)
        this.#redis.off('ready', onReady).off('error', onError)
        resolve(ready)
      }
      const onReady = settle(true)
      const onError = settle(false)
      const timer = setTimeout(onError, timeoutMs)
      this.#redis.once('ready', onReady).once('error', onError)
    })
  }

  async close(): Promise<void> {
    // QUIT lets Redis answer what is pending; when it cannot be sent (not connected), drop the
    // connection and stop reconnecting.
    await this.#redis.quit().catch(() => this.#redis.disconnect())
  }
}
