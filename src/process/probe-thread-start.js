// D20: the probe thread's first module, plain JavaScript so that it loads without Node's
// TypeScript loader. It turns on the compile cache the process uses (bin/petstore.js) before the
// thread's TypeScript modules are loaded, so that they come stripped from the cache and the
// loader (a WebAssembly module) never loads in this thread either (docs/benchmarks.md).
import { enableCompileCache } from 'node:module'
import { workerData } from 'node:worker_threads'

if (typeof workerData?.compileCache === 'string') enableCompileCache?.(workerData.compileCache)
await import('./probe-thread.ts')
