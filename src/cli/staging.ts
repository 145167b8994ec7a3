// `petstore staging reset|seed` (D29): a staging deployment's data emptied, and filled with
// pets to try it on. Only where PETSTORE_ENV=staging and the database itself was made by a
// staging process (recorded at its first migration, src/store/staging.ts): a staging process
// pointed at a production database by mistake must not be able to empty it. Anywhere else each
// refuses in one line, exit 1, before anything (a migration included) changes the database.
import { readFile } from 'node:fs/promises'
import type { Config } from '../config.ts'
import type { DeploymentEnv } from '../contract/api-key.ts'
import type { NewPet, PetStatus } from '../contract/schemas.ts'
import { prepareSchema } from '../process/schema.ts'
import { recordCommand } from '../store/environment.ts'
import { describeDatabase, openStore } from '../store/open.ts'
import { NotStagingDatabaseError, notStagingReason, StagingDataError } from '../store/staging.ts'
import type { Store } from '../store/store.ts'
import { type CliIo, firstLine } from './io.ts'
import { CommandError, parse, UsageError } from './usage.ts'

/** The most pets one seed creates, from --pets or a file. */
export const MAX_SEED_PETS = 1_000_000

/** --pets N: each pet's categoryId is one of 1 to this, in turn. */
const SEED_CATEGORIES = 5

/** A file's invalid pets named in the one line, at most; the rest are counted. */
const INVALID_SHOWN = 20

/** What `staging reset` without --yes asks to be typed at a terminal. */
const CONFIRMATION = 'reset'

export const STAGING_HELP = `Usage: petstore staging reset [--yes]
       petstore staging seed --pets N
       petstore staging seed --from FILE

A staging deployment's data, emptied and filled again. Both work only where PETSTORE_ENV=staging
and the database was made by a staging instance (recorded when its first migration ran); on any
other, or one made before that record existed, they refuse in one line and change nothing.

  reset             delete every pet and every Idempotency-Key record, in one transaction;
                    API keys stay, and the next pet's id is 1. It asks first on a terminal (type
                    "reset"); elsewhere it needs --yes.
  --yes             delete without asking
  seed --pets N     create N pets, 1 to 1000000: "Pet 1", "Pet 2", …, each categoryId 1 to 5
                    and each status (available, pending, sold, none) in turn
  seed --from FILE  create the pets in FILE, a JSON array of pets as createPet takes them
                    ([{"name": "Rex", "categoryId": 1, "status": "available"}, …]), in its
                    order. Every pet is checked first, as createPet checks a body: one that is
                    not valid is named by its index and nothing is created.
  -h, --help        this help

A seed creates its pets in one transaction, all or none, after the pets already there: their
ids continue from the last one (run reset first to start from 1). On PostgreSQL, reset needs
the role that owns the tables (the one that runs "petstore migrate").

Configuration comes from the environment (DATABASE_URL, PETSTORE_ENV, …); see docs/configuration.md.`

type Run = (config: Readonly<Config>, io: CliIo) => Promise<void>

type Command = 'reset' | 'seed'

/** Checks the arguments and returns what carries the command out. */
export function stagingCommand(args: string[]): Run {
  const [action, ...rest] = args
  switch (action) {
    case 'reset': {
      const { values } = parse({
        args: rest,
        options: { yes: { type: 'boolean', default: false } },
      })
      return (config, io) => reset(config, io, values.yes)
    }
    case 'seed': {
      const { values } = parse({
        args: rest,
        options: { pets: { type: 'string' }, from: { type: 'string' } },
      })
      const { pets, from } = values
      if (pets !== undefined && from === undefined) {
        const count = petCount(pets)
        return (config, io) => seed(config, io, async () => generatedPets(count))
      }
      if (from !== undefined && pets === undefined) {
        return (config, io) => seed(config, io, () => petsOfFile(from))
      }
      throw new UsageError('staging seed needs either --pets N or --from FILE')
    }
    case undefined:
      throw new UsageError('staging needs a subcommand: reset or seed')
    default:
      throw new UsageError(`unknown staging subcommand "${action}"; it is reset or seed`)
  }
}

async function reset(config: Readonly<Config>, io: CliIo, yes: boolean): Promise<void> {
  forStagingOnly('reset', config)
  if (!yes && io.interactive !== true) {
    throw new CommandError(
      'staging reset deletes every pet and asks first only on a terminal: give --yes to delete without asking; nothing was deleted',
    )
  }
  await onStagingDatabase('reset', config, async (store) => {
    if (!yes) await confirm(config, io)
    const { pets, idempotencyRecords } = await store.staging.reset()
    io.stdout.write(
      `Deleted ${plural(pets, 'pet')} and ${plural(idempotencyRecords, 'Idempotency-Key record')}; API keys kept. The next pet's id is 1.\n`,
    )
  })
}

async function seed(
  config: Readonly<Config>,
  io: CliIo,
  petsToSeed: () => Promise<NewPet[]>,
): Promise<void> {
  forStagingOnly('seed', config)
  // Read and checked before the database is opened: a wrong file changes nothing.
  const pets = await petsToSeed()
  await onStagingDatabase('seed', config, async (store) => {
    const { count, firstId, lastId } = await store.staging.seed(pets)
    const ids = count === 1 ? `id ${firstId}` : `ids ${firstId}–${lastId}`
    io.stdout.write(
      count === 0
        ? 'Created no pets: the file holds none.\n'
        : `Created ${plural(count, 'pet')}, ${ids}.\n`,
    )
  })
}

function forStagingOnly(command: Command, config: Readonly<Config>): void {
  if (config.env === 'staging') return
  throw new CommandError(
    `staging ${command} is for staging only: PETSTORE_ENV is ${config.env}; nothing was changed`,
  )
}

/**
 * Opens the store, refuses a database staging did not make, prepares the schema, runs `work`,
 * closes. Whether the database is staging's is read first, changing nothing: a database made by
 * production is not even migrated. A new one (no ledger yet) is made here, as staging's.
 */
async function onStagingDatabase(
  command: Command,
  config: Readonly<Config>,
  work: (store: Store) => Promise<void>,
): Promise<void> {
  const store = await openStore(config.database)
  try {
    const { applied, environment } = await store.schema()
    if (applied.length > 0 && environment !== 'staging') throw refusal(command, environment)
    await prepareSchema(store, config)
    await work(store)
  } catch (err) {
    // The store's own check, inside its transaction, of a record that changed since (not seen).
    if (err instanceof NotStagingDatabaseError) throw refusal(command, err.recorded)
    if (err instanceof StagingDataError) {
      throw new CommandError(`staging ${command} failed: ${err.message}`)
    }
    throw err
  } finally {
    await store.close()
  }
}

function refusal(command: Command, recorded: DeploymentEnv | undefined): CommandError {
  const what =
    recorded === undefined
      ? `. Make a new database for staging, or, where this one is staging's, record it so with "${recordCommand('staging')}"`
      : ''
  return new CommandError(
    `staging ${command} refused: ${notStagingReason(recorded)}, and staging commands change only a database made by staging; nothing was changed${what}`,
  )
}

/** At a terminal: the word typed, or nothing is deleted. */
async function confirm(config: Readonly<Config>, io: CliIo): Promise<void> {
  const { text } = describeDatabase(config.database)
  io.stderr.write(
    `This deletes every pet and every Idempotency-Key record in the ${text}; API keys stay.\nType "${CONFIRMATION}" to go on: `,
  )
  const answer = (await firstLine(io.stdin)).trim()
  if (answer !== CONFIRMATION) {
    throw new CommandError(
      `staging reset was not confirmed (it takes the word "${CONFIRMATION}"); nothing was deleted`,
    )
  }
}

function petCount(raw: string): number {
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_SEED_PETS) {
    throw new UsageError(
      `--pets must be a whole number from 1 to ${MAX_SEED_PETS} (got "${raw.slice(0, 32)}")`,
    )
  }
  return Number(raw)
}

/**
 * --pets N: the same N pets every time, "Pet 1" to "Pet N", with every categoryId from 1 to
 * SEED_CATEGORIES and every status of the contract (and none) in turn.
 */
async function generatedPets(count: number): Promise<NewPet[]> {
  const { PetStatus: statusSchema } = await import('../contract/schemas.ts')
  const statuses: readonly (PetStatus | undefined)[] = [
    ...(statusSchema.enum as readonly PetStatus[]),
    undefined,
  ]
  return Array.from({ length: count }, (_, i) => {
    const status = statuses[i % statuses.length]
    return {
      name: `Pet ${i + 1}`,
      categoryId: (i % SEED_CATEGORIES) + 1,
      ...(status === undefined ? {} : { status }),
    }
  })
}

/**
 * --from FILE: a JSON array of pets, each checked with createPet's own validator (the contract's
 * NewPet, bodies exactly as sent) and said in its words; every invalid one is named by its
 * index (the first INVALID_SHOWN, the rest counted), and then none is created.
 */
async function petsOfFile(file: string): Promise<NewPet[]> {
  const takes = 'staging seed --from takes a JSON array of pets as createPet takes them'
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    throw new CommandError(`cannot read ${file}: ${(err as Error).message}; nothing was created`)
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (err) {
    throw new CommandError(
      `${file} is not JSON (${(err as Error).message}); ${takes}; nothing was created`,
    )
  }
  if (!Array.isArray(value)) {
    const kind = value === null ? 'null' : typeof value === 'object' ? 'an object' : typeof value
    throw new CommandError(`${file} holds ${kind}, not an array; ${takes}; nothing was created`)
  }
  if (value.length > MAX_SEED_PETS) {
    throw new CommandError(
      `${file} holds ${value.length} pets; one seed creates at most ${MAX_SEED_PETS}; nothing was created`,
    )
  }
  const [{ bodyValidator, describeBodyErrors }, { NewPet, ref, sharedSchemas }] = await Promise.all(
    [import('../http/validation.ts'), import('../contract/schemas.ts')],
  )
  // As the createPet route refers to it.
  const validate = bodyValidator(sharedSchemas, ref(NewPet))
  const invalid: string[] = []
  for (const [index, pet] of value.entries()) {
    if (!validate(pet))
      invalid.push(`index ${index}: ${describeBodyErrors(validate.errors, 'pet')}`)
  }
  if (invalid.length > 0) {
    const more =
      invalid.length > INVALID_SHOWN ? `; and ${invalid.length - INVALID_SHOWN} more` : ''
    throw new CommandError(
      `${file} has ${plural(invalid.length, 'invalid pet')}, so nothing was created: ${invalid.slice(0, INVALID_SHOWN).join('; ')}${more}`,
    )
  }
  return value as NewPet[]
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`
}
