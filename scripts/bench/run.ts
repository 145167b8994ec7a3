// npm run bench: the one benchmark instrument, its scenarios subcommands of one harness
// (harness.ts: servers, alternating rounds, wrk, reports). With no scenario, the main run: the
// SQLite run (sqlite.ts), then the PostgreSQL run (postgres.ts), each writing its own section of
// docs/benchmarks.md and its figures beside it; --quick (CI's) writes .bench/benchmarks-quick.*
// instead and asserts nothing about speed, only that the harness works. LOG_LEVEL and
// METRICS_PORT, when set, are the services' (to measure what logging or metrics cost).
// `npm run bench -- --help` lists the scenarios and their options.
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { generateApiKey } from '../../src/contract/api-key.ts'
import { BENCH_DIR, ROOT, type RunSettings, requireWrk } from './harness.ts'

const RUN_USAGE = `[--quick] [--only list20,list100,status,deep,get,create,createKeyed]
      [--rounds 5] [--seconds 5] [--warmup 2] [--profile] [--out <path without .md>]`

/** A scenario: its options and what it does (for --help), and its run. */
type Scenario = { usage: string; main(argv: string[]): Promise<void> }

/** The scenarios, each loaded only when asked for. */
const SCENARIOS: Record<string, () => Promise<Scenario>> = {
  sqlite: async () => ({
    usage: `${RUN_USAGE}\n      the service beside same bytes and the Fastify floor, on SQLite`,
    main: async (argv) => (await import('./sqlite.ts')).benchSqlite(runSettings(argv)),
  }),
  postgres: async () => ({
    usage: `${RUN_USAGE}\n      the service direct and through PgBouncer, beside same bytes`,
    main: async (argv) => (await import('./postgres.ts')).benchPostgres(runSettings(argv)),
  }),
  ab: () => import('./ab.ts'),
  'auth-flood': () => import('./auth-flood.ts'),
  instructions: () => import('./instructions.ts'),
  'probe-flood': () => import('./probe-flood.ts'),
  seed: () => import('./seed.ts'),
  'time-profile': () => import('./time-profile.ts'),
}

/** The main run's settings, SQLite and PostgreSQL alike; --profile: the service's --cpu-prof. */
function runSettings(argv: string[]): RunSettings {
  const text = { type: 'string' } as const
  const flag = { type: 'boolean', default: false } as const
  const options = { quick: flag, only: text, rounds: text, seconds: text, warmup: text }
  const { values } = parseArgs({ args: argv, options: { ...options, profile: flag, out: text } })
  const quick = values.quick
  requireWrk()
  return {
    mode: quick ? 'quick' : 'full',
    pets: quick ? 10_000 : 1_000_000,
    smallPets: 1_000,
    rounds: Number(values.rounds ?? (quick ? 1 : 5)),
    seconds: Number(values.seconds ?? (quick ? 1 : 5)),
    warmupSeconds: Number(values.warmup ?? (quick ? 0 : 2)),
    // Quick: 50 connections only, so that CI's run stays under a minute.
    connections: quick ? [50] : [10, 50],
    only: values.only,
    profile: values.profile,
    outBase:
      values.out ?? (quick ? join(BENCH_DIR, 'benchmarks-quick') : join(ROOT, 'docs/benchmarks')),
    key: generateApiKey('production'),
  }
}

const [first = '', ...rest] = process.argv.slice(2)
const load = SCENARIOS[first]
if (first === '--help') {
  const lines = [`npm run bench -- ${RUN_USAGE}\n      the SQLite run, then the PostgreSQL run`]
  for (const [name, scenario] of Object.entries(SCENARIOS)) {
    lines.push(`npm run bench -- ${name} ${(await scenario()).usage}`)
  }
  process.stdout.write(`${lines.join('\n')}\n`)
} else if (load !== undefined) {
  const scenario = await load()
  if (rest.includes('--help')) process.stdout.write(`npm run bench -- ${first} ${scenario.usage}\n`)
  else await scenario.main(rest)
} else if (first === '' || first.startsWith('-')) {
  const settings = runSettings(process.argv.slice(2))
  await (await import('./sqlite.ts')).benchSqlite(settings)
  await (await import('./postgres.ts')).benchPostgres(settings)
} else {
  process.stderr.write(`no scenario ${first}; npm run bench -- --help lists them\n`)
  process.exit(2)
}
