// What compression costs and saves (D26): listPets `limit=100` from the service as an operator
// runs it (bin/petstore.js serve, SQLite, metrics on, LOG_LEVEL=warn), asked for with
// `Accept-Encoding: identity`, `gzip` and `br`, variant by variant within each round so that drift
// hits all three. Server on one core, the load generator on the other. Prints the medians over the
// rounds: requests a second, p50 and p99, the server's CPU per request, and the bytes of one body.
// Then, in this process, what one such body costs to compress at each setting we could pick,
// brotli's default quality 11 among them.
//
//   node scripts/bench/compression.ts [--rounds 3] [--seconds 5] [--connections 50]
import { copyFileSync, existsSync, mkdirSync, rmSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { brotliCompressSync, constants, gzipSync } from 'node:zlib'
import { generateApiKey } from '../../src/contract/api-key.ts'
import { BROTLI_QUALITY } from '../../src/http/plugins/compression.ts'
import { measure, type RunFigures, requireWrk, warmUp } from './load.ts'
import { pinSelf, startServer } from './processes.ts'
import { seed } from './seed.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const BENCH_DIR = join(ROOT, '.bench')
const PETS = 10_000
const PATH = '/v1/pets?limit=100'

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '50' },
  },
})
const rounds = Number(args.rounds)
const seconds = Number(args.seconds)
const connections = Number(args.connections)
const codings = ['identity', 'gzip', 'br'] as const
const log = (line: string) => process.stdout.write(`${line}\n`)

async function seededCopy(): Promise<string> {
  mkdirSync(BENCH_DIR, { recursive: true })
  const seedPath = join(BENCH_DIR, `compression-seed-${PETS}.db`)
  if (!existsSync(seedPath)) {
    log(`seeding ${PETS.toLocaleString('en')} pets…`)
    await seed(PETS, seedPath)
  }
  const copy = join(BENCH_DIR, 'compression-run.db')
  for (const suffix of ['', '-wal', '-shm']) rmSync(copy + suffix, { force: true })
  copyFileSync(seedPath, copy)
  return copy
}

/** One answer's body as sent (not decoded), and its Content-Encoding. */
function bodyAsSent(url: string, headers: Record<string, string>) {
  return new Promise<{ bytes: Buffer; coding: string }>((resolve, reject) => {
    httpRequest(url, { headers }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () =>
        resolve({
          bytes: Buffer.concat(chunks),
          coding: String(res.headers['content-encoding'] ?? 'identity'),
        }),
      )
    })
      .on('error', reject)
      .end()
  })
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

/** CPU time of compressing `body` once with `compress`, µs (the mean over a second's worth). */
function compressionCost(body: Buffer, compress: (b: Buffer) => Buffer) {
  const start = process.cpuUsage()
  let runs = 0
  let size = 0
  const until = performance.now() + 1000
  while (performance.now() < until) {
    size = compress(body).length
    runs++
  }
  const used = process.cpuUsage(start)
  return { us: (used.user + used.system) / runs, bytes: size }
}

requireWrk()
pinSelf()
const key = generateApiKey('production')
const service = await startServer(
  'service',
  [join(ROOT, 'bin/petstore.js'), 'serve'],
  {
    DATABASE_URL: `sqlite:${await seededCopy()}`,
    LOG_LEVEL: 'warn',
    METRICS_PORT: '0',
    PETSTORE_RATE_LIMIT: '0',
    PETSTORE_API_KEYS: key,
    // Not shedding (D16): a stall of a shared machine would turn into 503s and void the run.
    PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '0',
  },
  '/readyz',
)
try {
  const bytes: Record<string, number> = {}
  let identityBody: Buffer = Buffer.alloc(0)
  for (const coding of codings) {
    const sent = await bodyAsSent(service.url + PATH, {
      authorization: `Bearer ${key}`,
      'accept-encoding': coding,
    })
    if (sent.coding !== coding) throw new Error(`asked for ${coding}, got ${sent.coding}`)
    bytes[coding] = sent.bytes.length
    if (coding === 'identity') identityBody = sent.bytes
  }
  const runs: Record<string, RunFigures[]> = { identity: [], gzip: [], br: [] }
  const requestFor = (coding: string) => ({
    method: 'GET' as const,
    path: PATH,
    headers: { 'accept-encoding': coding },
  })
  for (const coding of codings) {
    await warmUp(
      { url: service.url, pid: service.pid, key, request: requestFor(coding), connections },
      2,
    )
  }
  for (let round = 1; round <= rounds; round++) {
    for (const coding of codings) {
      const figures = await measure({
        url: service.url,
        pid: service.pid,
        key,
        request: requestFor(coding),
        connections,
        seconds,
      })
      runs[coding]?.push(figures)
      log(
        `round ${round} ${coding}: ${figures.rps.toFixed(0)} req/s, p99 ${figures.p99.toFixed(1)} ms, ${figures.cpuUsPerRequest.toFixed(1)} µs CPU`,
      )
    }
  }
  log('')
  log(
    `listPets \`limit=100\`, ${connections} connections, medians of ${rounds} rounds of ${seconds} s`,
  )
  log('')
  log('| Accept-Encoding | req/s | p50 ms | p99 ms | server CPU µs/request | bytes/response |')
  log('| --- | ---: | ---: | ---: | ---: | ---: |')
  for (const coding of codings) {
    const figures = runs[coding] ?? []
    log(
      `| ${coding} | ${median(figures.map((f) => f.rps)).toFixed(0)} | ${median(figures.map((f) => f.p50)).toFixed(2)} | ${median(figures.map((f) => f.p99)).toFixed(2)} | ${median(figures.map((f) => f.cpuUsPerRequest)).toFixed(1)} | ${bytes[coding]} |`,
    )
  }
  log('')
  log(`One body of ${identityBody.length} bytes compressed in this process (CPU µs, bytes):`)
  log('')
  const brotli = (quality: number) => (b: Buffer) =>
    brotliCompressSync(b, { params: { [constants.BROTLI_PARAM_QUALITY]: quality } })
  const settings: [string, (b: Buffer) => Buffer][] = [
    ['gzip level 6 (zlib default)', (b) => gzipSync(b)],
    ['gzip level 1', (b) => gzipSync(b, { level: 1 })],
    [`br quality ${BROTLI_QUALITY} (ours)`, brotli(BROTLI_QUALITY)],
    ['br quality 4 (@fastify/compress’s default)', brotli(4)],
    ['br quality 6', brotli(6)],
    ['br quality 11 (brotli default)', brotli(11)],
  ]
  log('| setting | CPU µs | bytes |')
  log('| --- | ---: | ---: |')
  for (const [name, compress] of settings) {
    const { us, bytes: size } = compressionCost(identityBody, compress)
    log(`| ${name} | ${us.toFixed(1)} | ${size} |`)
  }
} finally {
  await service.stop()
}
