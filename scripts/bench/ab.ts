// `npm run bench -- ab`: two versions of the service side by side, this checkout against another
// one (e.g. an export of the commit before a change), each on its own copy of the seeded SQLite
// file, in alternating rounds, so that a change's cost or gain is measured in CPU µs/req, req/s
// and RSS in one run.
//
// --base-node: the Node.js that runs the base (this checkout's runs on the Node.js running the
// harness), to compare two lines of Node.js on one checkout: `npm run node24`, then
// `npm run bench -- ab --base . --base-node scripts/node-24/node_modules/.bin/node`.
// --node-flags: flags for this checkout's `node` only, to measure a flag against its absence
// (then --base may be this checkout too). --env NAME=VALUE (repeatable): a setting for this
// checkout's service only, e.g. --env METRICS_PORT=off to measure what metrics cost.
// --database <PostgreSQL URL>: both services on that database (seeded with --pets pets) with the
// PostgreSQL run's pool size, instead of SQLite copies.
import { execFileSync } from 'node:child_process'
import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { generateApiKey } from '../../src/contract/api-key.ts'
import * as harness from './harness.ts'
import { POOL_SIZE } from './postgres.ts'
import { seededCopy } from './seed.ts'

export const usage = `--base <other checkout> [--only list20,list100,get,create] [--rounds 3]
      [--seconds 3] [--connections 50] [--pets 1000000] [--node-flags="--max-semi-space-size=4"]
      [--base-node <node binary>] [--env NAME=VALUE]… [--database <PostgreSQL URL>]
      this checkout against another, side by side`

export async function main(argv: string[]): Promise<void> {
  const text = (value?: string) => ({ type: 'string', default: value }) as const
  const options = {
    ...{ base: text(), only: text('list20,list100,get,create'), rounds: text('3') },
    ...{ seconds: text('3'), connections: text('50'), pets: text('1000000') },
    ...{ 'node-flags': text(''), database: text(), 'base-node': text() },
    env: { type: 'string', multiple: true, default: [] as string[] },
  } as const
  const { values: args } = parseArgs({ args: argv, options })
  if (args.base === undefined) throw new Error(`usage: npm run bench -- ab ${usage}`)
  const base = resolve(args.base)
  const pets = Number(args.pets)
  const key = generateApiKey('production')
  const database = async (name: string): Promise<harness.Database> =>
    args.database === undefined
      ? { sqlite: await seededCopy(pets, `ab-${name}`) }
      : { url: args.database, poolSize: POOL_SIZE }
  // Load shedding on (its hook runs for every request, as shipped), with a threshold that a busy
  // shared machine does not reach: a shed request would void the round.
  const shedding = { PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '5000' }
  harness.requireWrk()
  const baseNode = args['base-node'] === undefined ? undefined : resolve(args['base-node'])
  const baseEnv = harness.serviceEnv(key, await database('base'), shedding)
  const thisEnv = harness.serviceEnv(key, await database('this'), {
    ...shedding,
    ...harness.envSettings(args.env),
  })
  harness.pinSelf()
  const baseline = await harness.startService('base', baseEnv, { checkout: base, node: baseNode })
  const running = [baseline]
  try {
    const nodeArgs = (args['node-flags'] ?? '').split(' ').filter((flag) => flag !== '')
    const candidate = await harness.startService('this', thisEnv, { nodeArgs })
    running.push(candidate)
    const version = execFileSync(baseNode ?? process.execPath, ['--version'], { encoding: 'utf8' })
    harness.log(
      `base: ${base} on Node.js ${version.trim()}; this: ${harness.ROOT} on Node.js ${process.version}`,
    )
    const settings = { rounds: Number(args.rounds), seconds: Number(args.seconds), key }
    for (const operation of harness.selectOperations(pets, args.only)) {
      const connections = Number(args.connections)
      const result = await harness.pair(
        { ...settings, warmupSeconds: 2 },
        operation,
        connections,
        candidate,
        baseline,
      )
      const { service: b, baseline: a, ratio } = result
      const cpu = (f: harness.RunFigures) => f.cpuUsPerRequest.toFixed(0)
      const perRound = result.rounds.map((r) => `${cpu(r.baseline)}/${cpu(r.service)}`)
      harness.log(`${operation.id}: CPU µs/req per round, base/this: ${perRound.join(' ')}`)
      const rss = `RSS ${a.rssMb.toFixed(0)} → ${b.rssMb.toFixed(0)} MB`
      const p99 = `p99 ${a.p99.toFixed(2)} → ${b.p99.toFixed(2)} ms`
      const rps = `req/s ${Math.round(a.rps)} → ${Math.round(b.rps)} (${ratio.rps.toFixed(2)}×)`
      const cpus = `CPU µs/req base ${a.cpuUsPerRequest.toFixed(1)} → this ${b.cpuUsPerRequest.toFixed(1)}`
      harness.log(`${operation.id}: ${cpus}; ${rps}; ${p99}; ${rss}`)
    }
  } finally {
    await harness.stopAll(running)
  }
}
