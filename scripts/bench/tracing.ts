// What tracing costs (D23): this checkout's service three times side by side, each on its own
// copy of the seeded SQLite file, in alternating rounds (rounds.ts, the ab.ts way): tracing off
// (no OTEL_ variable), on with the default sampler (parentbased_traceidratio, 0.1), and on with
// OTEL_TRACES_SAMPLER=always_on. Both traced services export over OTLP/HTTP (http/protobuf) to a
// sink this script starts in a process of its own, on the load generator's core (the servers'
// core stays theirs): node:http on 127.0.0.1, which counts and discards what it is sent and
// answers 200. Each traced service has its own path prefix on the sink, so its exports are
// counted apart. Reports per operation CPU µs/req, req/s, p99 and RSS of the three, and their
// ratios to off (medians of the per-round ratios). After each operation's rounds, one more run
// of each traced service alone measures what its exports are: requests, bytes and spans per
// second at the sink, and spans per answered request (below the spans a request makes, the batch
// processor's queue dropped some). Run `npm run bench -- --quick` or a full run first: it seeds
// .bench/seed-<count>-*.db.
//
//   node scripts/bench/tracing.ts [--only list20,get,create,createKeyed] [--rounds 5]
//        [--seconds 3] [--connections 50] [--pets 1000000] [--database <PostgreSQL URL>]
//        [--profile]
//
// --database: the three services on that database (seeded with --pets pets, e.g. by
// scripts/bench/postgres.ts's seed) with the PostgreSQL run's pool size, instead of SQLite copies.
// --profile: the servers run with --cpu-prof, their profiles written to .bench/profiles/tracing-*
// when they stop (read them with profile-top.ts); the profiler costs CPU, so not for figures.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:http'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { generateApiKey } from '../../src/contract/api-key.ts'
import {
  measure,
  type Request,
  type RunFigures,
  requireWrk,
  sideBySideEnv,
  sideBySideRequests,
} from './load.ts'
import { POOL_SIZE as POSTGRES_POOL_SIZE } from './postgres.ts'
import {
  cpuSeconds,
  pinning,
  pinSelf,
  type ServerProcess,
  startServer,
  TASKSET,
} from './processes.ts'
import type { Role } from './report.ts'
import { compare, median } from './rounds.ts'
import { seededCopy } from './seed.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const BENCH_DIR = join(ROOT, '.bench')
const OTLP_TRACES_PATH = '/v1/traces'

/** What the sink has received for one path prefix (one traced service). */
interface SinkCounts {
  requests: number
  bytes: number
  spans: number
}

/** Reads a protobuf varint at `at`: its value and where the next field starts. */
function varint(buffer: Buffer, at: number): [value: number, next: number] {
  let value = 0
  let scale = 1
  for (let i = at; i < buffer.length; i++) {
    const byte = buffer[i] as number
    value += (byte & 0x7f) * scale
    if (byte < 0x80) return [value, i + 1]
    scale *= 128
  }
  throw new Error('truncated varint')
}

/** The length-delimited fields numbered `field` in a protobuf message, as [start, end) pairs. */
function fields(buffer: Buffer, start: number, end: number, field: number): [number, number][] {
  const found: [number, number][] = []
  let at = start
  while (at < end) {
    const [tag, next] = varint(buffer, at)
    at = next
    const wireType = tag & 7
    if (wireType === 0) at = varint(buffer, at)[1]
    else if (wireType === 1) at += 8
    else if (wireType === 5) at += 4
    else if (wireType === 2) {
      const [length, from] = varint(buffer, at)
      if (Math.floor(tag / 8) === field) found.push([from, from + length])
      at = from + length
    } else throw new Error(`protobuf wire type ${wireType} not expected`)
  }
  return found
}

/**
 * Spans in an ExportTraceServiceRequest (opentelemetry-proto): resource_spans = 1, each with
 * scope_spans = 2, each with spans = 2.
 */
function spanCount(body: Buffer): number {
  let count = 0
  for (const [start, end] of fields(body, 0, body.length, 1)) {
    for (const [from, to] of fields(body, start, end, 2)) count += fields(body, from, to, 2).length
  }
  return count
}

/**
 * The OTLP/HTTP sink, run as `node scripts/bench/tracing.ts --sink`: POST <prefix>/v1/traces is
 * counted under its prefix and answered 200 with an empty ExportTraceServiceResponse; GET /counts
 * answers what it has counted. Prints its port once it listens.
 */
async function runSink(): Promise<void> {
  const counts: Record<string, SinkCounts> = {}
  const server = createServer((request, response) => {
    const path = request.url ?? ''
    if (request.method === 'GET' && path === '/counts') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(counts))
      return
    }
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      if (request.method === 'POST' && path.endsWith(OTLP_TRACES_PATH)) {
        const body = Buffer.concat(chunks)
        const prefix = path.slice(0, -OTLP_TRACES_PATH.length)
        const count = counts[prefix] ?? { requests: 0, bytes: 0, spans: 0 }
        counts[prefix] = count
        count.requests++
        count.bytes += body.length
        count.spans += spanCount(body)
        response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
      } else response.writeHead(404).end()
    })
  })
  server.keepAliveTimeout = 60_000
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  process.stdout.write(`${address.port}\n`)
}

interface Sink {
  url: string
  pid: number
  counts(): Promise<Record<string, SinkCounts>>
  stop(): Promise<void>
}

/** Starts the sink in its own process, on the load generator's core. */
async function startSink(): Promise<Sink> {
  const command = [process.execPath, fileURLToPath(import.meta.url), '--sink']
  const [file, ...rest] = pinning ? [TASKSET, '-c', pinning.load, ...command] : command
  const child = spawn(file as string, rest, { stdio: ['ignore', 'pipe', 'inherit'] })
  const exited = once(child, 'exit')
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream })
  const [line] = (await Promise.race([once(lines, 'line'), exited])) as [string | number | null]
  if (typeof line !== 'string') throw new Error('the OTLP sink exited before it listened')
  const url = `http://127.0.0.1:${line.trim()}`
  return {
    url,
    pid: child.pid ?? 0,
    async counts() {
      const response = await fetch(`${url}/counts`)
      return (await response.json()) as Record<string, SinkCounts>
    },
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM')
      await exited
    },
  }
}

if (process.argv.includes('--sink')) {
  await runSink()
} else {
  await bench()
}

async function bench(): Promise<void> {
  const { values: args } = parseArgs({
    options: {
      only: { type: 'string', default: 'list20,get,create,createKeyed' },
      rounds: { type: 'string', default: '5' },
      seconds: { type: 'string', default: '3' },
      connections: { type: 'string', default: '50' },
      pets: { type: 'string', default: '1000000' },
      database: { type: 'string' },
      profile: { type: 'boolean', default: false },
    },
  })
  const pets = Number(args.pets)
  const seconds = Number(args.seconds)
  const connections = Number(args.connections)
  const requests = sideBySideRequests(pets)
  const only = args.only.split(',')
  for (const id of only) if (requests[id] === undefined) throw new Error(`unknown scenario ${id}`)

  const key = generateApiKey('production')
  const log = (line: string) => process.stdout.write(`${line}\n`)

  // rounds.ts's compare() runs up to five servers in rotating order under named roles; three of
  // its roles carry the three services here.
  const VARIANTS = [
    { name: 'off', role: 'service' },
    { name: 'default', role: 'framework' },
    { name: 'always_on', role: 'ceiling' },
  ] as const satisfies readonly { name: string; role: Role }[]
  type Variant = (typeof VARIANTS)[number]
  const tracingEnv = (variant: Variant, sinkUrl: string): Record<string, string> => {
    if (variant.name === 'off') return {}
    return {
      OTEL_EXPORTER_OTLP_ENDPOINT: `${sinkUrl}/${variant.name}`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      ...(variant.name === 'always_on' ? { OTEL_TRACES_SAMPLER: 'always_on' } : {}),
    }
  }

  function start(variant: Variant, sinkUrl: string): Promise<ServerProcess> {
    const nodeArgs = args.profile
      ? ['--cpu-prof', `--cpu-prof-dir=${join(BENCH_DIR, 'profiles', `tracing-${variant.name}`)}`]
      : []
    return startServer(
      variant.name,
      [...nodeArgs, join(ROOT, 'bin/petstore.js'), 'serve'],
      {
        ...sideBySideEnv({
          key,
          database:
            args.database === undefined
              ? { sqliteCopy: seededCopy(BENCH_DIR, pets, `tracing-${variant.name}`) }
              : { url: args.database, poolSize: POSTGRES_POOL_SIZE },
        }),
        ...tracingEnv(variant, sinkUrl),
      },
      '/readyz',
    )
  }

  requireWrk()
  pinSelf()
  const sink = await startSink()
  const servers: ServerProcess[] = []
  try {
    for (const variant of VARIANTS) servers.push(await start(variant, sink.url))
    const byRole = Object.fromEntries(
      VARIANTS.map((variant, i) => [variant.role, servers[i] as ServerProcess]),
    ) as Record<Variant['role'], ServerProcess>
    log(
      `${ROOT} on Node.js ${process.version}, ${args.database === undefined ? `SQLite, ${pets} pets` : 'PostgreSQL'}; ` +
        `OTLP sink ${sink.url} (pid ${sink.pid}); ${args.rounds} rounds of ${seconds} s, ${connections} connections`,
    )
    const settings = { rounds: Number(args.rounds), seconds, warmupSeconds: 2, key, log }
    const fmt = (value: number, digits = 0) => value.toFixed(digits)
    for (const id of only) {
      const request = requests[id] as Request
      const result = await compare(settings, id, request, connections, byRole)
      const rounds = result.rounds as Record<Variant['role'], RunFigures>[]
      const cpuPerRound = rounds.map((r) =>
        VARIANTS.map((v) => fmt(r[v.role].cpuUsPerRequest)).join('/'),
      )
      log(`${id}: CPU µs/req per round, off/default/always_on: ${cpuPerRound.join(' ')}`)
      const ratio = (variant: Variant, pick: (f: RunFigures) => number) =>
        median(rounds.map((r) => pick(r[variant.role]) / pick(r.service)))
      for (const variant of VARIANTS) {
        const f = result.figures[variant.role] as RunFigures
        const versus =
          variant.name === 'off'
            ? ''
            : ` (CPU ${fmt(
                ratio(variant, (x) => x.cpuUsPerRequest),
                2,
              )}×, req/s ${fmt(
                ratio(variant, (x) => x.rps),
                2,
              )}×, p99 ${fmt(
                ratio(variant, (x) => x.p99),
                2,
              )}×, RSS ${fmt(
                ratio(variant, (x) => x.rssMb),
                2,
              )}× of off)`
        log(
          `${id} ${variant.name}: CPU ${fmt(f.cpuUsPerRequest, 1)} µs/req, ${fmt(f.rps)} req/s, ` +
            `p99 ${fmt(f.p99, 2)} ms, RSS ${fmt(f.rssMb)} MB, load core ${fmt(f.loadCoreBusy * 100)}%${versus}`,
        )
      }
      // Exports: each traced service alone for one more run, the sink's counts taken once the
      // batch processor (5 s schedule) has sent what the previous runs left queued, and again
      // after it has sent this run's.
      for (const variant of VARIANTS.slice(1)) {
        const server = byRole[variant.role]
        await new Promise((resolve) => setTimeout(resolve, 6_000))
        const before = (await sink.counts())[`/${variant.name}`]
        const run = await measure({
          url: server.url,
          pid: server.pid,
          key,
          request,
          connections,
          seconds,
        })
        await new Promise((resolve) => setTimeout(resolve, 6_000))
        const after = (await sink.counts())[`/${variant.name}`]
        const delta = (pick: (c: SinkCounts) => number) =>
          (after === undefined ? 0 : pick(after)) - (before === undefined ? 0 : pick(before))
        const answered = run.rps * seconds
        log(
          `${id} ${variant.name} exports: ${fmt(delta((c) => c.requests) / seconds, 1)} requests/s, ` +
            `${fmt(delta((c) => c.bytes) / seconds / 1024)} KiB/s, ${fmt(delta((c) => c.spans) / seconds)} spans/s, ` +
            `${fmt(delta((c) => c.spans) / answered, 2)} spans and ${fmt(delta((c) => c.bytes) / answered)} bytes per answer ` +
            `(${fmt(run.rps)} req/s, CPU ${fmt(run.cpuUsPerRequest, 1)} µs/req)`,
        )
      }
    }
    log(
      `OTLP sink: ${fmt(cpuSeconds(sink.pid), 1)} s CPU in all; received ${JSON.stringify(await sink.counts())}`,
    )
  } finally {
    await Promise.all(servers.map((server) => server.stop()))
    await sink.stop()
  }
}
