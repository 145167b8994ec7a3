// A thread of its own for test/http/key-cache.test.ts: random well-formed keys through the key
// verifier and a real SQLite store, reporting the thread's heap after each count of them. In a
// thread, the heap is this isolate's alone, whatever the test files beside it allocate.
import { getHeapStatistics, setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { parentPort, workerData } from 'node:worker_threads'
import { generateApiKey } from '../../src/contract/api-key.ts'
import { createKeyVerifier, verifyKey } from '../../src/keys/verifier.ts'
import { openSqliteStore } from '../../src/store/sqlite/store.ts'

const { path, checkpoints, cacheEntries } = workerData as {
  path: string
  checkpoints: number[]
  cacheEntries: number
}
setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void
const store = openSqliteStore({ path })
const verifier = createKeyVerifier({
  env: 'production',
  apiKeys: store.apiKeys,
  bootstrapKeys: [],
  cacheMs: 60_000,
  cacheEntries,
})
const heap: number[] = []
let refused = 0
let sent = 0
for (const checkpoint of checkpoints) {
  for (; sent < checkpoint; sent++) {
    if (!(await verifyKey(verifier, generateApiKey('production'))).valid) refused++
  }
  gc()
  gc()
  heap.push(getHeapStatistics().used_heap_size)
}
await store.close()
parentPort?.postMessage({ heap, refused })
