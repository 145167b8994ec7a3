// npm run bench: the one benchmark instrument, its scenarios as subcommands sharing one harness
// (harness.ts: the servers, alternating rounds, wrk and the report's parts). With no scenario,
// the main run: the SQLite run (sqlite.ts), then the PostgreSQL run (postgres.ts), each writing
// its own section of docs/benchmarks.md and its figures beside it. Servers run on one core, wrk
// on the other.
//
//   npm run bench                      the full run (many minutes)
//   npm run bench -- --quick           a small table, 50 connections, short runs, fewer
//                                      references measured (< 1 min); for CI, asserts nothing
//                                      about speed, only that the harness works
//   LOG_LEVEL=info METRICS_PORT=off npm run bench -- --quick
//                                      the service with per-request log lines, without metrics
//   npm run bench -- sqlite --only get,create --rounds 3 --seconds 5 --profile
//                                      the SQLite run alone, a subset; --profile writes the
//                                      service's --cpu-prof profile to .bench/profiles
//   npm run bench -- <scenario> --help the scenarios below, each with its options
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { generateApiKey } from '../../src/contract/api-key.ts'
import { BENCH_DIR, ROOT, type RunSettings, requireWrk } from './harness.ts'

const RUN_USAGE = `[--quick] [--only list20,list100,status,deep,get,create,createKeyed]
      [--rounds 5] [--seconds 5] [--warmup 2] [--profile] [--out <path without .md>]`

interface Scenario {
  usage: string
  main(argv: string[]): Promise<void>
}

/** The scenarios, each loaded only when asked for. */
const SCENARIOS: Record<string, () => Promise<Scenario>> = {
  sqlite: async () => ({
    usage: `${RUN_USAGE}\n      the service beside same bytes and the Fastify floor, on SQLite`,
    main: async (argv) => (await import('./sqlite.ts')).benchSqlite(runSettings(argv)),
  }),
  postgres: async () => ({
    usage: `${RUN_USAGE}\n      the service direct and through PgBouncer, beside same bytes on PostgreSQL`,
    main: async (argv) => (await import('./postgres.ts')).benchPostgres(runSettings(argv)),
  }),
  ab: () => import('./ab.ts'),
  instructions: () => import('./instructions.ts'),
  'probe-flood': () => import('./probe-flood.ts'),
  seed: () => import('./seed.ts'),
}

/** The main run's settings, SQLite and PostgreSQL alike. */
function runSettings(argv: string[]): RunSettings {
  const { values: args } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      only: { type: 'string' },
      rounds: { type: 'string' },
      seconds: { type: 'string' },
      warmup: { type: 'string' },
      profile: { type: 'boolean', default: false },
      out: { type: 'string' },
    },
  })
  const quick = args.quick
  requireWrk()
  return {
    mode: quick ? 'quick' : 'full',
    pets: quick ? 10_000 : 1_000_000,
    smallPets: 1_000,
    rounds: Number(args.rounds ?? (quick ? 1 : 5)),
    seconds: Number(args.seconds ?? (quick ? 1 : 5)),
    warmupSeconds: Number(args.warmup ?? (quick ? 0 : 2)),
    // Quick: 50 connections only, so that CI's run, with every reference, stays under a minute.
    connections: quick ? [50] : [10, 50],
    only: args.only,
    profile: args.profile,
    // The quick run never writes the committed files.
    outBase:
      args.out ?? (quick ? join(BENCH_DIR, 'benchmarks-quick') : join(ROOT, 'docs/benchmarks')),
    key: generateApiKey('production'),
  }
}

async function help(): Promise<void> {
  const lines = [`npm run bench -- ${RUN_USAGE}`, '      the SQLite run, then the PostgreSQL run']
  for (const [name, load] of Object.entries(SCENARIOS)) {
    lines.push(`npm run bench -- ${name} ${(await load()).usage}`)
  }
  process.stdout.write(`${lines.join('\n')}\n`)
}

const [first, ...rest] = process.argv.slice(2)
if (first === '--help' || first === '-h') {
  await help()
} else if (first !== undefined && !first.startsWith('-')) {
  const load = SCENARIOS[first]
  if (load === undefined) {
    process.stderr.write(`no scenario ${first}; npm run bench -- --help lists them\n`)
    process.exit(2)
  }
  const scenario = await load()
  if (rest.includes('--help')) process.stdout.write(`npm run bench -- ${first} ${scenario.usage}\n`)
  else await scenario.main(rest)
} else {
  const settings = runSettings(process.argv.slice(2))
  await (await import('./sqlite.ts')).benchSqlite(settings)
  await (await import('./postgres.ts')).benchPostgres(settings)
}
