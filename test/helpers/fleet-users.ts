// Users of our own SDK for the fleet test and the fleet harness (scripts/fleet): each creates a
// pet, reads it back and pages, over and over, with the client's default retries and automatic
// idempotency keys, until stopped. Every call, every retry and every answer that was not a success
// is recorded with its time, so that a fault's window can be cut out of the run; and what the
// database holds at the end is checked against what the SDK acknowledged.
import { deepEqual } from 'node:assert/strict'
import { setTimeout as delay } from 'node:timers/promises'
import { type Pet, Petstore } from '../../client/src/index.ts'
import { onDatabase } from './postgres.ts'

export interface CallRecord {
  /** performance.now() when the call began and when it settled. */
  start: number
  end: number
  operation: 'create' | 'get' | 'list'
  /** A create's pet name: what the final read looks for. */
  name?: string
  /** Undefined when the caller got its answer; else what the caller got instead. */
  failure?: string
}

export interface UsersRun {
  calls: CallRecord[]
  /** performance.now() of each retry the SDK made (its wait before the attempt). */
  retries: number[]
  /** Each attempt answered with a status other than 2xx: when, the status (a 503, a 500…), and
   * whether it said when to retry. */
  errorAnswers: Array<{ at: number; status: number; retryAfter: boolean }>
  acknowledged: Pet[]
  /** Names of creates that failed to their caller: each may or may not have been stored. */
  unacknowledged: string[]
}

export interface Users {
  /** What happened so far (the arrays grow while the users run). */
  readonly run: UsersRun
  /** Ends the users' loops (each finishes its call under way) and resolves with the run. */
  stop(): Promise<UsersRun>
}

function describeFailure(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err)
}

/** Names start with `prefix` (e.g. "fleet "), so that the check finds the users' pets. */
export function startUsers(options: {
  baseUrl: string
  apiKey: string
  users: number
  prefix: string
  /**
   * A user's pause after each round of calls. Without one, the users take every core they can
   * and a test's length is set by how busy the machine is rather than by what it checks.
   */
  thinkMs?: number
  /**
   * The SDK's retries a call (its default unless given): a caller that must ride out a database
   * failover longer than the default budget covers sets more (docs/fleet.md).
   */
  maxRetries?: number
}): Users {
  const run = emptyRun()
  const petstore = new Petstore({
    baseUrl: `${options.baseUrl}/v1`,
    apiKey: options.apiKey,
    ...(options.maxRetries === undefined ? {} : { maxRetries: options.maxRetries }),
    // Every attempt's answer, seen before the SDK decides to retry it: a 500 the SDK retried into
    // a success is still a 500 the service gave.
    fetch: async (url, init) => {
      const response = await fetch(url, init)
      if (response.status >= 300)
        run.errorAnswers.push({
          at: performance.now(),
          status: response.status,
          retryAfter: response.headers.has('retry-after'),
        })
      return response
    },
    // The SDK's own wait before a retry, counted: each retry waits once.
    sleep: (ms, signal) => {
      run.retries.push(performance.now())
      return new Promise((resolve, reject) => {
        const timer = setTimeout(resolve, ms)
        signal?.addEventListener(
          'abort',
          () => {
            clearTimeout(timer)
            reject(signal.reason)
          },
          { once: true },
        )
      })
    },
  })
  let running = true
  const call = async <T>(
    operation: CallRecord['operation'],
    body: () => Promise<T>,
    name?: string,
  ) => {
    const record: CallRecord = {
      start: performance.now(),
      end: 0,
      operation,
      ...(name === undefined ? {} : { name }),
    }
    run.calls.push(record)
    try {
      return await body()
    } catch (err) {
      record.failure = describeFailure(err)
      throw err
    } finally {
      record.end = performance.now()
    }
  }
  const user = async (u: number) => {
    for (let n = 0; running; n++) {
      const name = `${options.prefix}${u}-${n}`
      let pet: Pet
      try {
        pet = await call('create', () => petstore.pets.create({ name, categoryId: u + 1 }), name)
      } catch {
        run.unacknowledged.push(name)
        continue
      }
      run.acknowledged.push(pet)
      try {
        await call('get', async () => {
          const read = await petstore.pets.get(pet.id)
          deepEqual(read, pet, `pet ${pet.id} read back differs from the one created`)
        })
        await call('list', () => petstore.pets.listPage({ limit: 5 }))
      } catch {
        // Recorded in its call; the user goes on with the next pet.
      }
      if (options.thinkMs !== undefined) await delay(options.thinkMs)
    }
  }
  const all = Promise.all(Array.from({ length: options.users }, (_, u) => user(u)))
  return {
    run,
    async stop() {
      running = false
      await all
      return run
    },
  }
}

/** A run with nothing in it yet. */
export function emptyRun(): UsersRun {
  return { calls: [], retries: [], errorAnswers: [], acknowledged: [], unacknowledged: [] }
}

/**
 * The write gap of a fault at `at`: the longest stretch without an acknowledged create, among the
 * creates acknowledged from `at` until `until` and the last one before `at`.
 */
export function writeGapMs(calls: readonly CallRecord[], at: number, until: number): number {
  const acknowledged = calls
    .filter((c) => c.operation === 'create' && c.failure === undefined && c.end > 0)
    .map((c) => c.end)
    .sort((a, b) => a - b)
  const last = acknowledged.filter((end) => end <= at).at(-1) ?? at
  const since = [last, ...acknowledged.filter((end) => end > at && end <= until)]
  return Math.max(0, ...since.slice(1).map((end, i) => end - (since[i] as number)))
}

export interface StoredCheck {
  /** Pets the database holds whose name starts with the prefix. */
  stored: number
  /** Acknowledged creates not in the database, or stored otherwise than acknowledged. */
  lost: string[]
  /** Names stored more than once: a logical create that made more than one pet. */
  twice: string[]
  /** Stored pets no caller was told of (a create that failed to its caller yet was made). */
  unacknowledgedStored: number
  /** The names behind `lost` and `unacknowledgedStored`, to tell which fault each came in. */
  lostNames: string[]
  unacknowledgedStoredNames: string[]
}

/** Compares the database at `databaseUrl` with what the users were told. */
export async function checkStored(
  databaseUrl: string,
  prefix: string,
  run: UsersRun,
): Promise<StoredCheck> {
  const rows = await onDatabase(databaseUrl, async (client) => {
    const { rows } = await client.query<{ id: number; name: string; category_id: number }>(
      `SELECT id::float8 AS id, name, category_id::float8 AS category_id FROM pets WHERE name LIKE $1`,
      [`${prefix}%`],
    )
    return rows
  })
  const byName = new Map<string, number>()
  for (const row of rows) byName.set(row.name, (byName.get(row.name) ?? 0) + 1)
  const twice = [...byName].filter(([, count]) => count > 1).map(([name]) => name)
  const byId = new Map(rows.map((row) => [row.id, row]))
  const lost = run.acknowledged.filter((pet) => {
    const row = byId.get(pet.id)
    return row === undefined || row.name !== pet.name || row.category_id !== pet.categoryId
  })
  const acknowledgedIds = new Set(run.acknowledged.map((pet) => pet.id))
  const unacknowledgedStored = rows.filter((row) => !acknowledgedIds.has(row.id))
  return {
    stored: rows.length,
    lost: lost.map((pet) => `${pet.id} (${pet.name})`),
    twice,
    unacknowledgedStored: unacknowledgedStored.length,
    lostNames: lost.map((pet) => pet.name),
    unacknowledgedStoredNames: unacknowledgedStored.map((row) => row.name),
  }
}
