// `petstore environment show|record` (D29): which environment the database belongs to, and the
// one deliberate way to change that record. A process's migrations record its PETSTORE_ENV when
// they make a database (store/environment.ts); production then refuses a database staging made,
// and the staging commands one they did not. Recording is run by a process of the environment
// recorded, with --yes, and prints what the record now means: what it allows is said, never
// implied.
import type { Config } from '../config.ts'
import type { DeploymentEnv } from '../contract/api-key.ts'
import { onOpenStore } from '../store/open.ts'
import type { Store } from '../store/store.ts'
import type { CliIo } from './io.ts'
import { CommandError, parse, UsageError } from './usage.ts'

export const ENVIRONMENT_HELP = `Usage: petstore environment show
       petstore environment record production|staging --yes

Which environment the database DATABASE_URL names belongs to. When a process's migrations make a
new database, they record its PETSTORE_ENV there. Production refuses to serve, migrate or make
keys on a database staging made ("staging reset" may empty it at any time); "staging reset" and
"staging seed" change only a database staging made.

  show              print the recorded environment: production, staging, or unknown (a
                    database made before migration 5 recorded it)
  record ENV --yes  record the database as ENV's, in place of what it said, and print what
                    that means. ENV must be this process's PETSTORE_ENV. production: production
                    serves it, and the staging commands refuse it. staging: "staging reset" may
                    delete every pet in it, and production refuses it. Without --yes nothing
                    is changed. On PostgreSQL, run it as the role that owns the tables.
  -h, --help        this help

Configuration comes from the environment (DATABASE_URL, PETSTORE_ENV, …); see docs/configuration.md.`

type Run = (config: Readonly<Config>, io: CliIo) => Promise<void>

/** What a database recorded as each environment's is for, as `record` says it. */
const MEANING: Record<DeploymentEnv, string> = {
  production:
    'production serves it, migrates it and makes keys on it, and "staging reset" and "staging seed" refuse it',
  staging:
    '"staging reset" may delete every pet in it and "staging seed" add pets, and production refuses to serve, migrate or make keys on it',
}

/** Checks the arguments and returns what carries the command out. */
export function environmentCommand(args: string[]): Run {
  const [action, ...rest] = args
  switch (action) {
    case 'show':
      parse({ args: rest })
      return (config, io) => onOpenStore(config.database, (store) => show(store, config.env, io))
    case 'record': {
      const { values, positionals } = parse({
        args: rest,
        allowPositionals: true,
        options: { yes: { type: 'boolean', default: false } },
      })
      const [environment, ...extra] = positionals
      if ((environment !== 'production' && environment !== 'staging') || extra.length > 0) {
        throw new UsageError(
          'environment record needs one argument: production or staging (the environment to record)',
        )
      }
      return (config, io) => record(config, io, environment, values.yes)
    }
    case undefined:
      throw new UsageError('environment needs a subcommand: show or record')
    default:
      throw new UsageError(
        `unknown environment subcommand "${action.slice(0, 32)}"; it is show or record`,
      )
  }
}

/**
 * The one line `environment show` and `migrate --status` print of the record: `recorded`, or
 * none on a new database (`isNew`), which its first migration records as `environment`'s.
 */
export function environmentLine(
  recorded: DeploymentEnv | undefined,
  isNew: boolean,
  environment: DeploymentEnv,
): string {
  if (recorded !== undefined) return `Environment: ${recorded} (recorded for the database).`
  if (isNew) {
    return `Environment: none yet; the first migration records this process's (${environment}).`
  }
  return 'Environment: unknown (the database was made before migration 5 recorded it); "petstore environment record production|staging --yes" records it.'
}

async function show(store: Store, environment: DeploymentEnv, io: CliIo): Promise<void> {
  const state = await store.schema()
  io.stdout.write(
    `${environmentLine(state.environment, state.applied.length === 0, environment)}\n`,
  )
}

async function record(
  config: Readonly<Config>,
  io: CliIo,
  environment: DeploymentEnv,
  yes: boolean,
): Promise<void> {
  // Checked before the database is opened: a refusal changes nothing.
  if (config.env !== environment) {
    throw new CommandError(
      `environment record ${environment} is run by a ${environment} process, and PETSTORE_ENV is ${config.env}: set PETSTORE_ENV=${environment}; nothing was changed`,
    )
  }
  if (!yes) {
    throw new CommandError(
      `environment record ${environment} records the database as ${environment}'s: ${MEANING[environment]}. Give --yes to record it; nothing was changed`,
    )
  }
  // As it is, not migrated: a database production refuses must be recordable.
  await onOpenStore(config.database, async (store) => {
    const state = await store.schema()
    if (state.applied.length === 0) {
      throw new CommandError(
        `the database is new: its first migration records this process's environment (run "petstore migrate" with PETSTORE_ENV=${environment}); nothing was changed`,
      )
    }
    const before = await store.environment.record(environment)
    io.stdout.write(
      before === environment
        ? `The database was recorded as ${environment}'s already: ${MEANING[environment]}.\n`
        : `Recorded the database as ${environment}'s (it said ${before ?? 'nothing'}): ${MEANING[environment]}.\n`,
    )
  })
}
