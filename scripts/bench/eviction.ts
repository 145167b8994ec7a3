// What forgetting the oldest entry costs, per operation, in a checkout's own modules (run by
// auth-flood.ts, a process for each checkout, so that one's compiled code does not run the
// other's): the failed-authentication limit as the app builds it (its counts and the in-memory
// counter's, 100,000 addresses each), per failure from a new address; the key cache (10,000
// entries a map), per refusal of a new hash. Each at its bound, where every operation forgets
// one, and with a bound far above, where none does; the same work otherwise. Timed over many
// operations after the maps are full, several times on fresh instances.
//
//   node scripts/bench/eviction.ts <checkout> <operations> <repeats>
//
// Prints one JSON line: for each case, µs per operation of every repeat.
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

const [checkout, operationsArg, repeatsArg] = process.argv.slice(2)
if (!checkout || !operationsArg || !repeatsArg) {
  process.stderr.write('usage: node scripts/bench/eviction.ts <checkout> <operations> <repeats>\n')
  process.exit(2)
}
const operations = Number(operationsArg)
const repeats = Number(repeatsArg)
const load = (path: string) => import(pathToFileURL(join(checkout, path)).href)

/** What the two modules export, as far as this uses them (the same in both checkouts). */
type Modules = {
  AuthFailureLimit: new (
    options: object,
  ) => {
    refusedFor(address: string): number | undefined
    failed(address: string, log: object): Promise<void>
  }
  MemoryWindowCounter: new (maxKeys?: number) => object
  KeyCache: new (
    options: object,
  ) => {
    refusedRecently(hash: string): boolean
    rememberRefused(hash: string): void
  }
}
const modules = {
  ...(await load('src/rate-limit/auth-failures.ts')),
  ...(await load('src/rate-limit/counter.ts')),
  ...(await load('src/keys/key-cache.ts')),
} as Modules

const clock = { now: () => 0 }
const log = { error() {}, warn() {}, info() {} }
const address = (i: number) => `11.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`

/** µs per failure from a new address, once `fill` addresses have failed. */
async function perFailure(bound: number, fill: number): Promise<number> {
  const limit = new modules.AuthFailureLimit({
    limit: 30,
    windowSeconds: 60,
    counter: new modules.MemoryWindowCounter(bound),
    clock,
    maxAddresses: bound,
  })
  const fail = async (i: number) => {
    const from = address(i)
    limit.refusedFor(from)
    await limit.failed(from, log)
  }
  for (let i = 0; i < fill; i++) await fail(i)
  const start = process.hrtime.bigint()
  for (let i = fill; i < fill + operations; i++) await fail(i)
  return Number(process.hrtime.bigint() - start) / 1e3 / operations
}

/** µs per refusal of a new hash, once `fill` hashes have been refused. */
function perMiss(bound: number, fill: number, hashes: string[]): number {
  const cache = new modules.KeyCache({ maxAgeMs: 1_000, clock, maxEntries: bound })
  const miss = (hash: string) => {
    if (!cache.refusedRecently(hash)) cache.rememberRefused(hash)
  }
  for (let i = 0; i < fill; i++) miss(hashes[i] as string)
  const start = process.hrtime.bigint()
  for (let i = fill; i < fill + operations; i++) miss(hashes[i] as string)
  return Number(process.hrtime.bigint() - start) / 1e3 / operations
}

const ADDRESSES = 100_000
const ENTRIES = 10_000
/** A bound none of the runs reaches. */
const FAR = 4 * (ADDRESSES + operations)
const hashes = Array.from({ length: ENTRIES + operations }, () => randomBytes(32).toString('hex'))
const figures: Record<string, number[]> = {
  failureAtBound: [],
  failureBelowBound: [],
  missAtBound: [],
  missBelowBound: [],
}
for (let i = 0; i < repeats; i++) {
  figures.failureAtBound?.push(await perFailure(ADDRESSES, ADDRESSES))
  figures.failureBelowBound?.push(await perFailure(FAR, ADDRESSES))
  figures.missAtBound?.push(perMiss(ENTRIES, ENTRIES, hashes))
  figures.missBelowBound?.push(perMiss(FAR, ENTRIES, hashes))
}
process.stdout.write(`${JSON.stringify(figures)}\n`)
