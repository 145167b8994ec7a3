// What compression costs and saves (D26): listPets `limit=100` from the service as an operator
// runs it (bin/petstore.js serve, SQLite, metrics on, LOG_LEVEL=warn), asked for with
// `Accept-Encoding: identity`, `gzip` and `br`, variant by variant within each round so that drift
// hits all three. Server on one core, the load generator on the other. Prints the medians over the
// rounds: requests a second, p50 and p99, the server's CPU per request, and the bytes of one body.
// The same for the /docs page's largest file, swagger-ui's 1.7 MB bundle, which anyone may ask
// for without a key: what one request for it costs the server in each coding (D26).
// Then, in this process, what one such body costs to compress at each setting we could pick,
// brotli's default quality 11 among them, and what compressing all of swagger-ui's files once in
// both codings costs (what keeping them compressed from the start would cost each process).
//
//   node scripts/bench/compression.ts [--rounds 3] [--seconds 5] [--connections 50]
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { brotliCompressSync, constants, gzipSync } from 'node:zlib'
import { generateApiKey } from '../../src/contract/api-key.ts'
import {
  BROTLI_QUALITY,
  CONTENT_CODINGS,
  compressWhole,
} from '../../src/http/plugins/compression.ts'
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

/** The medians of each coding's rounds, the server's CPU per request in µs or ms. */
function printTable(
  runs: Record<string, RunFigures[]>,
  bytes: Record<string, number>,
  unit: 'µs' | 'ms',
) {
  log(`| Accept-Encoding | req/s | p50 ms | p99 ms | server CPU ${unit}/request | bytes/response |`)
  log('| --- | ---: | ---: | ---: | ---: | ---: |')
  for (const coding of codings) {
    const figures = runs[coding] ?? []
    const cpuUs = median(figures.map((f) => f.cpuUsPerRequest))
    const cpu = unit === 'ms' ? (cpuUs / 1000).toFixed(2) : cpuUs.toFixed(1)
    log(
      `| ${coding} | ${median(figures.map((f) => f.rps)).toFixed(0)} | ${median(figures.map((f) => f.p50)).toFixed(2)} | ${median(figures.map((f) => f.p99)).toFixed(2)} | ${cpu} | ${bytes[coding]} |`,
    )
  }
}

/** What compressing swagger-ui's files once in every coding costs (D26: kept, not at start). */
async function swaggerUiCompressedOnce(): Promise<string> {
  const folder = join(dirname(fileURLToPath(import.meta.resolve('@fastify/swagger-ui'))), 'static')
  const names = readdirSync(folder).filter((name) => !name.endsWith('.png'))
  const start = process.cpuUsage()
  let kept = 0
  for (const name of names) {
    const body = readFileSync(join(folder, name))
    for (const coding of CONTENT_CODINGS) kept += (await compressWhole(body, coding)).length
  }
  const used = process.cpuUsage(start)
  const ms = (used.user + used.system) / 1000
  return `swagger-ui's ${names.length} files but its PNGs, each compressed once in ${CONTENT_CODINGS.join(' and ')}: ${ms.toFixed(0)} ms of CPU, ${kept} bytes`
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
  /** Each coding's body as sent, after checking that it was sent in that coding. */
  const sentPerCoding = async (path: string, headers: Record<string, string>) => {
    const bodies: Record<string, Buffer> = {}
    for (const coding of codings) {
      const sent = await bodyAsSent(service.url + path, { ...headers, 'accept-encoding': coding })
      if (sent.coding !== coding)
        throw new Error(`${path}: asked for ${coding}, got ${sent.coding}`)
      bodies[coding] = sent.bytes
    }
    return bodies
  }
  const lengths = (bodies: Record<string, Buffer>) =>
    Object.fromEntries(Object.entries(bodies).map(([coding, body]) => [coding, body.length]))

  /** Warm-up, then `rounds` rounds of each coding in turn, so that drift hits all three. */
  const measureCodings = async (path: string) => {
    const runs: Record<string, RunFigures[]> = { identity: [], gzip: [], br: [] }
    const requestFor = (coding: string) => ({
      method: 'GET' as const,
      path,
      headers: { 'accept-encoding': coding },
    })
    const target = { url: service.url, pid: service.pid, key, connections }
    for (const coding of codings) await warmUp({ ...target, request: requestFor(coding) }, 2)
    for (let round = 1; round <= rounds; round++) {
      for (const coding of codings) {
        const figures = await measure({ ...target, request: requestFor(coding), seconds })
        runs[coding]?.push(figures)
        log(
          `round ${round} ${path} ${coding}: ${figures.rps.toFixed(0)} req/s, p99 ${figures.p99.toFixed(1)} ms, ${figures.cpuUsPerRequest.toFixed(1)} µs CPU`,
        )
      }
    }
    return runs
  }

  const listBodies = await sentPerCoding(PATH, { authorization: `Bearer ${key}` })
  const identityBody = listBodies.identity ?? Buffer.alloc(0)
  const listRuns = await measureCodings(PATH)
  log('')
  log(
    `listPets \`limit=100\`, ${connections} connections, medians of ${rounds} rounds of ${seconds} s`,
  )
  log('')
  printTable(listRuns, lengths(listBodies), 'µs')

  // The URL the page names (with its version), as a browser asks for it: no key needed.
  const page = (await bodyAsSent(`${service.url}/docs`, {})).bytes.toString('utf8')
  const bundlePath = /"([^"]*\/swagger-ui-bundle\.js\?v=[\w-]+)"/.exec(page)?.[1]
  if (bundlePath === undefined) throw new Error('/docs names no swagger-ui-bundle.js')
  const bundleBodies = await sentPerCoding(bundlePath, {})
  const bundleRuns = await measureCodings(bundlePath)
  log('')
  log(
    `/docs's swagger-ui-bundle.js, ${connections} connections, medians of ${rounds} rounds of ${seconds} s`,
  )
  log('')
  printTable(bundleRuns, lengths(bundleBodies), 'ms')
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
  log('')
  log(await swaggerUiCompressedOnce())
} finally {
  await service.stop()
}
