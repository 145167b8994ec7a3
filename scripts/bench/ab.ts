// Two versions of the service side by side: this checkout against another one (e.g. an export
// of the commit before a change), each on its own copy of the seeded SQLite file, in alternating
// rounds, so that a change's cost or gain is measured in CPU µs/req, req/s and RSS in one run.
// Run `npm run bench -- --quick` or a full run first: it seeds .bench/seed-<count>-*.db.
//
//   node scripts/bench/ab.ts --base <other checkout> [--only get,list20] [--rounds 3]
//        [--seconds 3] [--connections 50] [--pets 1000000] [--node-flags="--max-semi-space-size=4"]
//        [--base-node <node binary>]
//
// --base-node: the Node.js that runs the base (this checkout's runs on the Node.js running this
// script), to compare two lines of Node.js on one checkout: `npm run node24`, then
//   node scripts/bench/ab.ts --base . --base-node scripts/node-24/node_modules/.bin/node
//
// --node-flags: flags for this checkout's `node` only, to measure a flag against its absence
// (then --base may be this checkout too). --env NAME=VALUE (repeatable): a setting for this
// checkout's service only, e.g. --env METRICS_PORT=off to measure what metrics cost.
// --database <PostgreSQL URL>: both services on that database (seeded with --pets pets, e.g. by
// scripts/bench/postgres.ts's seed) with the PostgreSQL run's pool size, instead of SQLite copies.
import { execFileSync } from 'node:child_process'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { generateApiKey } from '../../src/contract/api-key.ts'
import { requireWrk, sideBySideEnv, sideBySideRequests } from './load.ts'
import { POOL_SIZE as POSTGRES_POOL_SIZE } from './postgres.ts'
import { pinSelf, type ServerProcess, startServer } from './processes.ts'
import { pair } from './rounds.ts'
import { seededCopy } from './seed.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const BENCH_DIR = join(ROOT, '.bench')

const { values: args } = parseArgs({
  options: {
    base: { type: 'string' },
    only: { type: 'string', default: 'list20,list100,get,create' },
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '50' },
    pets: { type: 'string', default: '1000000' },
    'node-flags': { type: 'string', default: '' },
    env: { type: 'string', multiple: true, default: [] },
    database: { type: 'string' },
    'base-node': { type: 'string' },
  },
})
if (args.base === undefined) {
  process.stderr.write('usage: node scripts/bench/ab.ts --base <other checkout> [options]\n')
  process.exit(2)
}
const base = resolve(args.base)
const pets = Number(args.pets)
const requests = sideBySideRequests(pets)

const key = generateApiKey('production')
const flags = args['node-flags'].split(' ').filter((flag) => flag !== '')
const candidateEnv = Object.fromEntries(
  args.env.map((setting) => {
    const at = setting.indexOf('=')
    if (at < 1) throw new Error(`--env takes NAME=VALUE, not ${setting}`)
    return [setting.slice(0, at), setting.slice(at + 1)]
  }),
)

function start(
  name: string,
  checkout: string,
  nodeFlags: string[],
  env: Record<string, string> = {},
  node?: string,
): Promise<ServerProcess> {
  return startServer(
    name,
    [...nodeFlags, join(checkout, 'bin/petstore.js'), 'serve'],
    {
      ...sideBySideEnv({
        key,
        database:
          args.database === undefined
            ? { sqliteCopy: seededCopy(BENCH_DIR, pets, `ab-${name}`) }
            : { url: args.database, poolSize: POSTGRES_POOL_SIZE },
      }),
      ...env,
    },
    '/readyz',
    node,
  )
}

requireWrk()
pinSelf()
const baseNode = args['base-node'] === undefined ? undefined : resolve(args['base-node'])
const baseline = await start('base', base, [], {}, baseNode)
const candidate = await start('this', ROOT, flags, candidateEnv)
const log = (line: string) => process.stdout.write(`${line}\n`)
const baseVersion = execFileSync(baseNode ?? process.execPath, ['--version'], { encoding: 'utf8' })
log(`base: ${base} on Node.js ${baseVersion.trim()}; this: ${ROOT} on Node.js ${process.version}`)
const settings = {
  rounds: Number(args.rounds),
  seconds: Number(args.seconds),
  warmupSeconds: 2,
  key,
  log,
}
try {
  for (const id of args.only.split(',')) {
    const request = requests[id]
    if (request === undefined) throw new Error(`unknown scenario ${id}`)
    const result = await pair(settings, id, request, Number(args.connections), candidate, baseline)
    const { service: b, baseline: a } = result
    const perRound = result.rounds.map(
      (r) => `${r.baseline.cpuUsPerRequest.toFixed(0)}/${r.service.cpuUsPerRequest.toFixed(0)}`,
    )
    log(`${id}: CPU µs/req per round, base/this: ${perRound.join(' ')}`)
    log(
      `${id}: CPU µs/req base ${a.cpuUsPerRequest.toFixed(1)} → this ${b.cpuUsPerRequest.toFixed(1)}; ` +
        `req/s ${Math.round(a.rps)} → ${Math.round(b.rps)} (${result.ratio.rps.toFixed(2)}×); ` +
        `p99 ${a.p99.toFixed(2)} → ${b.p99.toFixed(2)} ms; RSS ${a.rssMb.toFixed(0)} → ${b.rssMb.toFixed(0)} MB`,
    )
  }
} finally {
  await Promise.all([baseline.stop(), candidate.stop()])
}
