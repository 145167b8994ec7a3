// The `petstore` command: a second entry point into the same config and store (no second loader).
//   petstore serve | migrate | backup FILE | keys create|list|revoke | pets list|add|get
//            | staging reset|seed | environment show|record | --help | --version
// Exit codes: 0 done; 1 the command could not be carried out (configuration, database, listen,
// a key that does not exist, an API call that failed); 2 it was called wrongly. Either failure is one line on stderr;
// only `petstore` alone and --help print a usage text.
import { readFileSync } from 'node:fs'
import { createServer, isIP, type ListenOptions } from 'node:net'
import { availableParallelism } from 'node:os'
import {
  type Config,
  ConfigError,
  configDefaults,
  loadConfig,
  type SideListener,
} from '../config.ts'
import { isKeyId } from '../contract/api-key.ts'
import { issueApiKey } from '../keys/issue.ts'
import type { SideListenError } from '../observability/side-listener.ts'
import { type BackupSummary, backupSqliteDatabase } from '../operations/backup.ts'
import { printable } from '../printable.ts'
import { appliedNotice, newerNotice, prepareSchema } from '../process/schema.ts'
import { releaseVersion } from '../release.ts'
import {
  DatabaseEnvironmentError,
  EnvironmentRecordError,
  refusesDatabase,
} from '../store/environment.ts'
import {
  blockingMigrations,
  describeMigration,
  MigrationsPendingError,
  SchemaTooNewError,
} from '../store/migrations.ts'
import { onOpenStore } from '../store/open.ts'
import { type Store, StoreOpenError, StoreUnavailableError } from '../store/store.ts'
import { ENVIRONMENT_HELP, environmentCommand, environmentLine } from './environment.ts'
import { type CliIo, processIo } from './io.ts'
import { PETS_HELP } from './pets-help.ts'
import { STAGING_HELP, stagingCommand } from './staging.ts'
import { formatTable } from './table.ts'
import { CommandError, parse, type UnknownOption, UsageError } from './usage.ts'

const OVERVIEW = `Usage: petstore <command> [options]

Commands:
  serve [--workers N|auto]   start the HTTP service (applies pending migrations first)
  migrate [--status]         apply pending database migrations, then exit; --status: list them
  backup FILE                copy the SQLite database to FILE while the service runs
  keys create --name NAME    create an API key; it is printed once and never again
  keys list [--json]         list keys: id, name, hint, created, state
  keys revoke ID             revoke a key; requests with it get 401 within PETSTORE_KEY_CACHE_MS
  pets list|add|get          call a running service's API (PETSTORE_URL, PETSTORE_API_KEY)
  staging reset|seed         staging only: delete every pet, or create pets to try it on
  environment show|record    which environment the database belongs to; record it anew

  petstore <command> --help  the command's own help (also: petstore help <command>)
  petstore --version, -v     the version

Configuration comes from the environment (PORT, HOST, DATABASE_URL, PETSTORE_ENV, …); see
docs/configuration.md. Exit codes: 0 done, 1 failed (one line on stderr says why), 2 wrong usage.`

const ENVIRONMENT = `Configuration comes from the environment (DATABASE_URL, PETSTORE_ENV, …); see docs/configuration.md.`

const HELP: Record<Command, string> = {
  serve: `Usage: petstore serve [--workers N|auto]

Applies pending database migrations (unless PETSTORE_MIGRATE=off: then it refuses a database
that lacks one), then serves the API on HOST:PORT. The first start with no API key anywhere
creates one and prints it once on stderr. SIGTERM or SIGINT stops it: the requests in progress
finish first.

Options:
  --workers N|auto  run N processes on one port; auto: one per core.
                    They share rate-limit counts only through REDIS_URL.
  -h, --help        this help

Configuration comes from the environment (PORT, HOST, DATABASE_URL, PETSTORE_ENV,
PETSTORE_API_KEYS, PETSTORE_RATE_LIMIT, REDIS_URL, LOG_LEVEL, …); see docs/configuration.md.`,

  migrate: `Usage: petstore migrate [--status]

Applies pending database migrations to the database DATABASE_URL names, then exits, with one
line for each migration applied (its version, name and duration) or one saying the database is
up to date. serve applies them on every start too, unless PETSTORE_MIGRATE=off; run this to
apply them before the new version's instances start (docs/operations.md, Upgrading and rolling
back). A database a newer release has changed in a way this release must not serve is refused,
changing nothing.

Options:
  --status    change nothing: list the migrations applied and pending, and those of a newer
              release; exit 1 when some are pending or this release must not serve the database
  -h, --help  this help

${ENVIRONMENT}`,

  backup: `Usage: petstore backup FILE

Copies the SQLite database DATABASE_URL names to FILE, consistently, while the service runs
and writes. FILE must be new, in a folder that exists. For PostgreSQL use pg_dump (see
docs/operations.md, Backups, which also says how to restore).

${ENVIRONMENT}`,

  keys: `Usage: petstore keys create --name NAME
       petstore keys list [--json]
       petstore keys revoke ID

  create --name NAME  create an API key for NAME (who or what it is for). The key is printed
                      once, on stdout, and never again; only its hash is stored.
  list [--json]       list the keys: ID, name, hint (prefix…last 4), created, state; --json
                      prints them as a JSON array, each key with its "state".
  revoke ID           revoke the key with that ID (from keys list): every instance answers
                      401 to it within PETSTORE_KEY_CACHE_MS (1 s by default).

Keys are kept in the database DATABASE_URL names; they are made for PETSTORE_ENV
(production: petstore_live_…, staging: petstore_staging_…). ${ENVIRONMENT}`,

  pets: PETS_HELP,

  staging: STAGING_HELP,

  environment: ENVIRONMENT_HELP,
}

const COMMANDS = ['serve', 'migrate', 'backup', 'keys', 'pets', 'staging', 'environment'] as const
type Command = (typeof COMMANDS)[number]

function isCommand(name: string | undefined): name is Command {
  return (COMMANDS as readonly (string | undefined)[]).includes(name)
}

/** What runs once the arguments are checked and the configuration is loaded; it writes to `io`. */
type Run = (config: Readonly<Config>, io: CliIo) => Promise<void>

/**
 * `serve [--workers N|auto]`: one process without --workers, else a cluster. The server and
 * what it needs (Fastify, node:cluster, the listeners' node:http, …) are loaded only here:
 * loading them is most of what a start costs, which the other commands, --help and --version
 * need not wait for. (The store, the key and the backup modules are small enough that loading
 * them only where used saves nothing measurable.)
 */
async function serveCommand(args: string[]): Promise<Run> {
  const [
    { serve },
    { MAX_WORKERS, serveCluster },
    { SideListenError },
    { DRAIN_MS },
    { default: cluster },
  ] = await Promise.all([
    import('../process/server.ts'),
    import('../process/cluster.ts'),
    import('../observability/side-listener.ts'),
    import('../process/shutdown.ts'),
    import('node:cluster'),
  ])
  const { values } = parse({ args, options: { workers: { type: 'string' } } }, settingHint)
  const raw = values.workers?.trim()
  let workers: number | undefined
  if (raw === 'auto') workers = Math.min(availableParallelism(), MAX_WORKERS)
  else if (raw !== undefined) {
    if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_WORKERS) {
      throw new UsageError(
        `--workers must be a whole number from 1 to ${MAX_WORKERS}, or auto (got "${raw}")`,
      )
    }
    workers = Number(raw)
  }
  return async (config) => {
    try {
      // HOST:PORT first, so that its failure is the one said when PROBE_HOST follows HOST.
      if (workers === undefined) {
        await checkListen(config)
        return await serve(config)
      }
      if (config.database.engine === 'sqlite' && config.database.path === ':memory:') {
        throw new UsageError(
          '--workers needs a database its processes share; sqlite::memory: lives inside one process',
        )
      }
      if (config.probes !== undefined && process.platform !== 'linux') {
        throw new CommandError(
          "PROBE_PORT under --workers needs Linux: each worker's probe thread binds the port with SO_REUSEPORT; run one process per container instead, or leave PROBE_PORT off",
        )
      }
      if (cluster.isPrimary) {
        await checkListen(config)
        await checkProbeListen(config.probes, SideListenError, DRAIN_MS + 2_000)
      }
      await serveCluster(config, workers)
    } catch (err) {
      const failure = listenFailure(err, config, SideListenError)
      throw failure === undefined ? err : new CommandError(failure)
    }
  }
}

/**
 * `serve --port 9000`: the service's settings come from the environment only (config.ts). An
 * unknown option named as one of its variables, in upper snake case with or without PETSTORE_
 * (`--port` PORT, `--log-level` LOG_LEVEL, `--rate-limit` PETSTORE_RATE_LIMIT), is answered
 * with the variable to set. The value given is repeated in the example only when it is plainly
 * harmless to show: a DATABASE_URL may hold a password.
 */
function settingHint({ rawName, value }: UnknownOption): string | undefined {
  if (!rawName.startsWith('--')) return undefined
  const name = rawName.slice(2).toUpperCase().replaceAll('-', '_')
  const variable = [name, `PETSTORE_${name}`].find((known) => Object.hasOwn(configDefaults, known))
  if (variable === undefined) return undefined
  const example = value !== undefined && /^[\w.:/-]{1,100}$/.test(value) ? value : '…'
  return `serve takes no ${rawName} option; set the ${variable} environment variable: "${variable}=${example} petstore serve"`
}

/**
 * Why the service cannot listen on HOST:PORT, as one line naming the variable to change, or
 * undefined for another error. Known by the error's code, from the system (listen, bind) or the
 * resolver (getaddrinfo). `sideError` is the side listeners' error class (loaded by serve).
 */
function listenFailure(
  err: unknown,
  config: Pick<Config, 'host' | 'port'>,
  sideError: typeof SideListenError,
): string | undefined {
  // D17, D20: a side listener's failure names its own variables (METRICS_PORT, PROBE_HOST, …).
  const side = err instanceof sideError ? err : undefined
  const cause = side ? side.cause : err
  const where = side ? side.listener : config
  const code = cause instanceof Error && 'code' in cause ? String(cause.code) : ''
  const reason = LISTEN_FAILURES[code]
  if (reason === undefined) return undefined
  const host = isIP(where.host) === 6 ? `[${where.host}]` : where.host
  const named = side ? reason.replace(/\((HOST|PORT)\)$/, `(${side.settings}_$1)`) : reason
  return `cannot listen on ${host}:${where.port}: ${named}`
}

const LISTEN_FAILURES: Partial<Record<string, string>> = {
  EADDRINUSE: 'the port is in use (PORT)',
  EACCES: 'permission denied; ports below 1024 need privileges (PORT)',
  EADDRNOTAVAIL: "the address is not one of this machine's (HOST)",
  ENOTFOUND: 'the host name does not resolve (HOST)',
  EAI_AGAIN: 'the host name could not be resolved; the resolver did not answer (HOST)',
}

/**
 * HOST:PORT tried before anything else binds or says it listens. `serve --workers`:
 * node:cluster binds the port in the primary and hands a failure to each worker, which the
 * primary then replaces, three times, before it gives up. So the primary first listens on
 * HOST:PORT itself and lets go at once, and a busy port or a wrong HOST is one line before any
 * worker starts. A port taken between this check and the workers' start still ends in exit 1,
 * after those three tries. A lone `serve` binds the side listeners before the API's (all bound
 * before any is said to listen), so the same check keeps a bad HOST from being reported as the
 * PROBE_HOST that defaults to it.
 */
async function checkListen(config: Pick<Config, 'host' | 'port'>): Promise<void> {
  await bindAndRelease({ host: config.host, port: config.port, exclusive: true })
}

/**
 * Under --workers, PROBE_HOST:PROBE_PORT too: each worker binds it itself with SO_REUSEPORT
 * (D20), and would silently share it with any process of this user that holds it so. So the
 * primary binds it alone first. Held without SO_REUSEPORT (another program), the start fails
 * at once with one line naming PROBE_PORT. Held with it, the holder is most likely the draining
 * workers of a primary that was killed, which let go once drained: it is tried again until
 * `waitMs` has passed, then fails the same way.
 */
async function checkProbeListen(
  probes: SideListener | undefined,
  sideError: typeof SideListenError,
  waitMs: number,
): Promise<void> {
  if (probes === undefined || process.platform !== 'linux') return
  const deadline = performance.now() + waitMs
  for (;;) {
    try {
      await bindAndRelease({ ...probes, exclusive: true })
      return
    } catch (err) {
      const inUse = err instanceof Error && 'code' in err && err.code === 'EADDRINUSE'
      const sharable =
        inUse &&
        (await bindAndRelease({ ...probes, exclusive: true, reusePort: true }).then(
          () => true,
          () => false,
        ))
      if (!sharable || performance.now() > deadline) throw new sideError('PROBE', probes, err)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
}

async function bindAndRelease(options: ListenOptions): Promise<void> {
  const server = createServer()
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options, resolve)
  })
  await new Promise<void>((resolve) => server.close(() => resolve()))
}

/**
 * Opens the store, prepares its schema as PETSTORE_MIGRATE says (D27: every command migrates,
 * or checks that nothing is pending), runs `work`, closes.
 */
function withStore<T>(config: Config, work: (store: Store) => Promise<T>): Promise<T> {
  return onOpenStore(config.database, async (store) => {
    await prepareSchema(store, config)
    return work(store)
  })
}

function migrateCommand(args: string[]): Run {
  const { values } = parse({ args, options: { status: { type: 'boolean' } } })
  if (values.status) return migrationStatus
  return (config, io) =>
    onOpenStore(config.database, async (store) => {
      // PETSTORE_MIGRATE=off keeps other commands from migrating; this one is how it is done.
      const run = await store.migrate(config.env)
      for (const migration of run.applied) {
        io.stdout.write(`${capitalised(appliedNotice(migration).message)}.\n`)
      }
      if (run.applied.length === 0) io.stdout.write('The database is up to date.\n')
      for (const notice of newerNotice(run.newer))
        io.stdout.write(`${capitalised(notice.message)}.\n`)
    })
}

/** D27: `migrate --status`, for a pipeline's check: applied, pending, newer; exit 1 if not ready. */
const migrationStatus: Run = (config, io) =>
  onOpenStore(config.database, async (store) => {
    const state = await store.schema()
    const newer = new Set(state.newer.map((entry) => entry.version))
    const rows = [
      ...state.applied.map((entry) => [
        String(entry.version),
        printable(entry.name),
        newer.has(entry.version)
          ? `applied by a newer release; this release ${entry.olderReleasesMayServe ? 'may' : 'must not'} serve it`
          : 'applied',
      ]),
      ...state.pending.map((migration) => [String(migration.version), migration.name, 'pending']),
    ]
    io.stdout.write(formatTable(['VERSION', 'NAME', 'STATE'], rows))
    io.stdout.write(
      `${environmentLine(state.environment, state.applied.length === 0, config.env)}\n`,
    )
    if (state.environment !== undefined && refusesDatabase(config.env, state.environment)) {
      throw new DatabaseEnvironmentError(config.env, state.environment)
    }
    const blocking = blockingMigrations(state)
    if (blocking.length > 0) throw new SchemaTooNewError(state, blocking)
    if (state.pending.length > 0) {
      throw new CommandError(
        `${state.pending.length === 1 ? 'a migration is' : `${state.pending.length} migrations are`} pending: ${state.pending.map(describeMigration).join(', ')}; "petstore migrate" applies them`,
      )
    }
  })

function capitalised(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1)
}

function backupCommand(args: string[]): Run {
  const { positionals } = parse({ args, allowPositionals: true })
  const [target, ...extra] = positionals
  if (target === undefined || extra.length > 0) {
    throw new UsageError('backup needs one argument: the file to write the copy to')
  }
  return async (config, io) => {
    if (config.database.engine !== 'sqlite') {
      throw new CommandError(
        'backup copies a SQLite database; for PostgreSQL use pg_dump (see docs/operations.md, Backups)',
      )
    }
    let copied: BackupSummary
    try {
      copied = await backupSqliteDatabase(config.database.path, target)
    } catch (err) {
      // The cases the function refuses, and SQLite's own (a full disk, an unwritable folder).
      throw new CommandError(`backup failed: ${err instanceof Error ? err.message : String(err)}`)
    }
    const { bytes, pets, apiKeys, activeApiKeys } = copied
    io.stdout.write(
      `Backed up ${config.database.path} to ${target}: ${formatBytes(bytes)}, ${plural(pets, 'pet')}, ${plural(apiKeys, 'API key')} (${activeApiKeys} active).\n`,
    )
  }
}

/** A size as `ls -lh` and `du -h` give it (powers of 1024), with the bytes for exactness. */
function formatBytes(bytes: number): string {
  const units = ['KiB', 'MiB', 'GiB', 'TiB']
  let value = bytes
  let unit = 'bytes'
  for (const next of units) {
    if (value < 1024) break
    value /= 1024
    unit = next
  }
  return unit === 'bytes' ? `${bytes} bytes` : `${value.toFixed(1)} ${unit} (${bytes} bytes)`
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`
}

function keysCommand(args: string[]): Run {
  const [action, ...rest] = args
  switch (action) {
    case 'create': {
      const { values } = parse({ args: rest, options: { name: { type: 'string' } } })
      const name = values.name?.trim()
      if (!name) throw new UsageError('keys create needs --name NAME (who or what the key is for)')
      return async (config, io) => {
        const { key, record } = await withStore(config, (store) =>
          issueApiKey(store.apiKeys, config.env, name),
        )
        io.stderr.write(`Created ${record.id} "${record.name}". The key is shown only this once:\n`)
        io.stdout.write(`${key}\n`)
      }
    }
    case 'list': {
      const { values } = parse({
        args: rest,
        options: { json: { type: 'boolean', default: false } },
      })
      return async (config, io) => {
        const keys = await withStore(config, (store) => store.apiKeys.list())
        if (values.json) io.stdout.write(`${JSON.stringify(keys.map(keyJson), null, 2)}\n`)
        else if (keys.length === 0) io.stdout.write('No API keys.\n')
        else io.stdout.write(keyTable(keys))
      }
    }
    case 'revoke': {
      const { positionals } = parse({ args: rest, allowPositionals: true })
      const [id, ...extra] = positionals
      if (id === undefined || extra.length > 0) {
        throw new UsageError(
          'keys revoke needs one argument: the key\'s ID (see "petstore keys list")',
        )
      }
      // Never repeated when it is not an id: it may be the secret itself.
      if (!isKeyId(id)) {
        throw new UsageError(
          id.startsWith('petstore_')
            ? 'keys revoke was given an API key where its ID is expected; nothing was revoked. Find the ID with "petstore keys list" (HINT shows the key\'s last 4 characters)'
            : 'keys revoke needs a key ID (key_ and 12 letters or digits, as "petstore keys list" shows); nothing was revoked',
        )
      }
      return async (config, io) => {
        const revoked = await withStore(config, (store) => store.apiKeys.revoke(id))
        if (!revoked) {
          throw new CommandError(`no active key with ID ${id} (see "petstore keys list")`)
        }
        io.stdout.write(`Revoked ${id}.\n`)
      }
    }
    case undefined:
      throw new UsageError('keys needs a subcommand: create, list or revoke')
    default:
      throw new UsageError(`unknown keys subcommand "${action}"; it is create, list or revoke`)
  }
}

type KeyRecord = Awaited<ReturnType<Store['apiKeys']['list']>>[number]

/**
 * `keys list --json`: each key's state said outright, so a script need not infer it from a
 * `revokedAt` that is absent for active keys.
 */
function keyJson(key: KeyRecord) {
  const { id, name, hint, createdAt, revokedAt } = key
  return {
    id,
    name,
    hint,
    state: revokedAt === undefined ? 'active' : 'revoked',
    createdAt,
    ...(revokedAt === undefined ? {} : { revokedAt }),
  }
}

function keyTable(keys: KeyRecord[]): string {
  const rows = keys.map((k) => [
    k.id,
    printable(k.name),
    k.hint,
    k.createdAt.toISOString(),
    k.revokedAt ? `revoked ${k.revokedAt.toISOString()}` : 'active',
  ])
  return formatTable(['ID', 'NAME', 'HINT', 'CREATED', 'STATE'], rows)
}

const PREPARE: Record<Exclude<Command, 'pets'>, (args: string[]) => Run | Promise<Run>> = {
  serve: serveCommand,
  migrate: migrateCommand,
  backup: backupCommand,
  keys: keysCommand,
  staging: stagingCommand,
  environment: environmentCommand,
}

/** The error's message and, where it has one, its cause's: the driver's or the system's words. */
function withCause(err: Error): string {
  return err.cause instanceof Error ? `${err.message} (${err.cause.message})` : err.message
}

function usageError(message: string, command: string | undefined, io: CliIo): number {
  const help = isCommand(command) ? `petstore ${command} --help` : 'petstore --help'
  io.stderr.write(`petstore: ${withoutKeys(message, io.env)}\nRun "${help}" for usage.\n`)
  return 2
}

/**
 * A message that repeats an argument may repeat a key pasted in the wrong place (D3): keys in
 * the petstore form, and the keys the environment holds or names a file of, are replaced before
 * it is shown, as a terminal's scrollback and a CI log keep what is printed.
 */
function withoutKeys(message: string, env: CliIo['env']): string {
  const listed = [env.PETSTORE_API_KEYS ?? '', keysFileText(env.PETSTORE_API_KEYS_FILE)]
  const known = [env.PETSTORE_API_KEY, ...listed.join(',').split(/[,\r\n]/)]
    .map((key) => key?.trim() ?? '')
    .filter((key) => key.length >= 8)
  const hidden = known.reduce((text, key) => text.replaceAll(key, KEY_NOT_SHOWN), message)
  return hidden.replace(/petstore_(?:live|staging)_[0-9A-Za-z]+/g, KEY_NOT_SHOWN)
}

const KEY_NOT_SHOWN = '<an API key, not shown>'

/** PETSTORE_API_KEYS_FILE's text, or none where it cannot be read (config.ts says why). */
function keysFileText(path: string | undefined): string {
  if (path === undefined || path.trim() === '') return ''
  try {
    return readFileSync(path.trim(), 'utf8')
  } catch {
    return ''
  }
}

/**
 * Runs `petstore ...argv` and returns its exit code. `io` is the process's streams and
 * environment (bin/petstore.js); the tests give their own, to run commands in-process.
 */
export async function main(argv: string[], io: CliIo = processIo): Promise<number> {
  const [command, ...rest] = argv
  if (command === undefined) {
    io.stderr.write(`${OVERVIEW}\n`)
    return 2
  }
  if (command === '--version' || command === '-v') {
    io.stdout.write(`petstore ${releaseVersion()}\n`)
    return 0
  }
  if (command === 'help' || command === '--help' || command === '-h') {
    const topic = command === 'help' ? rest[0] : undefined
    if (topic !== undefined && !isCommand(topic)) {
      return usageError(`no help for "${topic}": there is no such command`, undefined, io)
    }
    io.stdout.write(`${topic === undefined ? OVERVIEW : HELP[topic]}\n`)
    return 0
  }
  if (!isCommand(command)) {
    const hint = command.startsWith('-') ? 'unknown option' : 'unknown command'
    return usageError(`${hint} "${command}"`, undefined, io)
  }
  // Help anywhere after the command (before a `--`): `petstore keys create --help` is the keys
  // help.
  const options = rest.includes('--') ? rest.slice(0, rest.indexOf('--')) : rest
  if (options.includes('--help') || options.includes('-h')) {
    io.stdout.write(`${HELP[command]}\n`)
    return 0
  }
  try {
    // The arguments first: a wrong command line is said as such, whatever the environment.
    if (command === 'pets') {
      // A client of a service anywhere (D18): the service's own configuration plays no part.
      // Loaded only here: the client SDK and the TypeBox schemas were more than half of what
      // every other command spent starting.
      const { petsCommand } = await import('./pets.ts')
      await petsCommand(rest, io)()
      return 0
    }
    const run = await PREPARE[command](rest)
    await run(loadConfig(io.env), io)
    return 0
  } catch (err) {
    if (err instanceof UsageError) return usageError(err.message, command, io)
    // A database that cannot be opened or reached: the operator's to fix, so one line and
    // exit 1 (a supervisor may retry), not a stack trace.
    if (err instanceof StoreOpenError || err instanceof StoreUnavailableError) {
      io.stderr.write(`petstore: ${withCause(err)}\n`)
      return 1
    }
    // D27: a schema this release must not serve, or one it may not migrate itself; D29: a
    // database of an environment this process must not use, or a record it could not write.
    if (
      err instanceof SchemaTooNewError ||
      err instanceof MigrationsPendingError ||
      err instanceof DatabaseEnvironmentError ||
      err instanceof EnvironmentRecordError
    ) {
      io.stderr.write(`petstore: ${err.message}\n`)
      return 1
    }
    if (err instanceof CommandError) {
      io.stderr.write(`petstore: ${withoutKeys(err.message, io.env)}\n`)
      return 1
    }
    if (err instanceof ConfigError) {
      io.stderr.write(`petstore: invalid configuration: ${err.message}\n`)
      return 1
    }
    throw err
  }
}
