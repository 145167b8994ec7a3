// The `petstore` command: a second entry point into the same config and store (no second loader).
//   petstore serve | migrate | keys create --name NAME | keys list | keys revoke ID
import { availableParallelism } from 'node:os'
import { parseArgs } from 'node:util'
import { MAX_WORKERS, serveCluster } from '../cluster.ts'
import { type Config, ConfigError, loadConfig } from '../config.ts'
import { issueApiKey } from '../keys/issue.ts'
import { serve } from '../server.ts'
import { openStore } from '../store/open.ts'
import { backupSqliteDatabase } from '../store/sqlite.ts'
import { type Store, StoreOpenError, StoreUnavailableError } from '../store/store.ts'

const USAGE = `Usage: petstore <command>

  serve [--workers N|auto]   start the HTTP service (applies pending migrations first);
                             --workers runs N processes on one port (auto: one per core)
  migrate                    apply pending database migrations, then exit
  backup FILE                copy the SQLite database to FILE while the service runs
                             (PostgreSQL: use pg_dump)
  keys create --name NAME    create an API key; it is printed once and never again
  keys list [--json]         list keys: id, name, hint, created, revoked
  keys revoke ID             revoke a key; requests with it get 401 from then on

Configuration comes from the environment (DATABASE_URL, PETSTORE_ENV, …); see the README.`

/** The command was called wrongly: the message and the usage text, exit code 2. */
class UsageError extends Error {}
/** The command was right but could not be carried out: one line, exit code 1. */
class CommandError extends Error {}

/** `serve [--workers N|auto]`: undefined without --workers (one process, no cluster). */
function parseServeArgs(args: string[]): { workers: number | undefined } {
  const { values } = parseArgs({ args, options: { workers: { type: 'string' } } })
  const raw = values.workers?.trim()
  if (raw === undefined) return { workers: undefined }
  if (raw === 'auto') return { workers: Math.min(availableParallelism(), MAX_WORKERS) }
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_WORKERS) {
    throw new UsageError(
      `--workers must be a whole number from 1 to ${MAX_WORKERS}, or auto (got "${raw}")`,
    )
  }
  return { workers: Number(raw) }
}

/** Opens the store, applies pending migrations (every command does), runs `work`, closes. */
async function withStore<T>(
  config: Config,
  work: (store: Store, applied: number[]) => Promise<T>,
): Promise<T> {
  const store = await openStore(config.database)
  try {
    return await work(store, await store.migrate())
  } finally {
    await store.close()
  }
}

async function backupCommand(config: Config, args: string[]): Promise<void> {
  const { positionals } = parseArgs({ args, allowPositionals: true })
  const [target, ...extra] = positionals
  if (target === undefined || extra.length > 0) {
    throw new UsageError('backup needs one argument: the file to write the copy to')
  }
  if (config.database.engine !== 'sqlite') {
    throw new CommandError(
      'backup copies a SQLite database; for PostgreSQL use pg_dump (see the README)',
    )
  }
  let pages: number
  try {
    pages = await backupSqliteDatabase(config.database.path, target)
  } catch (err) {
    // The cases the function refuses, and SQLite's own (a full disk, an unwritable folder).
    throw new CommandError(`backup failed: ${err instanceof Error ? err.message : String(err)}`)
  }
  process.stdout.write(`Backed up ${config.database.path} to ${target} (${pages} pages).\n`)
}

async function keysCommand(config: Config, args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    options: { name: { type: 'string' }, json: { type: 'boolean', default: false } },
    allowPositionals: true,
  })
  const [action, id] = positionals
  switch (action) {
    case 'create': {
      const name = values.name?.trim()
      if (!name) throw new UsageError('keys create needs --name NAME (who or what the key is for)')
      const { key, record } = await withStore(config, (store) =>
        issueApiKey(store.apiKeys, config.env, name),
      )
      process.stderr.write(
        `Created ${record.id} "${record.name}". The key is shown only this once:\n`,
      )
      process.stdout.write(`${key}\n`)
      return
    }
    case 'list': {
      const keys = await withStore(config, (store) => store.apiKeys.list())
      if (values.json) {
        process.stdout.write(`${JSON.stringify(keys, null, 2)}\n`)
        return
      }
      if (keys.length === 0) {
        process.stdout.write('No API keys.\n')
        return
      }
      const rows = keys.map((k) => [
        k.id,
        k.name,
        k.hint,
        k.createdAt.toISOString(),
        k.revokedAt ? `revoked ${k.revokedAt.toISOString()}` : 'active',
      ])
      const table = [['ID', 'NAME', 'HINT', 'CREATED', 'STATE'], ...rows]
      const widths =
        table[0]?.map((_, col) => Math.max(...table.map((row) => row[col]?.length ?? 0))) ?? []
      for (const row of table) {
        process.stdout.write(
          `${row
            .map((cell, col) => cell.padEnd(widths[col] ?? 0))
            .join('  ')
            .trimEnd()}\n`,
        )
      }
      return
    }
    case 'revoke': {
      if (!id) throw new UsageError('keys revoke needs the key ID (see keys list)')
      const revoked = await withStore(config, (store) => store.apiKeys.revoke(id))
      if (!revoked) throw new UsageError(`no active key with ID ${id}`)
      process.stdout.write(`Revoked ${id}.\n`)
      return
    }
    default:
      throw new UsageError(`unknown keys command "${action ?? ''}"`)
  }
}

/** The error's message and, where it has one, its cause's: the driver's or the system's words. */
function withCause(err: Error): string {
  return err.cause instanceof Error ? `${err.message} (${err.cause.message})` : err.message
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv
  if (command === undefined) {
    process.stderr.write(`${USAGE}\n`)
    return 2
  }
  // Help after any command too: `petstore keys --help` is what the first start suggests.
  if (command === 'help' || argv.some((arg) => arg === '--help' || arg === '-h')) {
    process.stdout.write(`${USAGE}\n`)
    return 0
  }
  try {
    const config = loadConfig()
    switch (command) {
      case 'serve': {
        const { workers } = parseServeArgs(rest)
        const inMemory = config.database.engine === 'sqlite' && config.database.path === ':memory:'
        if (workers !== undefined && inMemory) {
          throw new UsageError(
            '--workers needs a database its processes share; sqlite::memory: lives inside one process',
          )
        }
        if (workers === undefined) await serve(config)
        else await serveCluster(config, workers)
        return 0
      }
      case 'migrate': {
        const applied = await withStore(config, async (_store, applied) => applied)
        process.stdout.write(
          applied.length === 0
            ? 'The database is up to date.\n'
            : `Applied migrations: ${applied.join(', ')}.\n`,
        )
        return 0
      }
      case 'backup':
        await backupCommand(config, rest)
        return 0
      case 'keys':
        await keysCommand(config, rest)
        return 0
      default:
        throw new UsageError(`unknown command "${command}"`)
    }
  } catch (err) {
    // A database that cannot be opened or reached: the operator's to fix, so one line and
    // exit 1 (a supervisor may retry), not a stack trace.
    if (err instanceof StoreOpenError || err instanceof StoreUnavailableError) {
      process.stderr.write(`petstore: ${withCause(err)}\n`)
      return 1
    }
    if (err instanceof CommandError) {
      process.stderr.write(`petstore: ${err.message}\n`)
      return 1
    }
    if (err instanceof ConfigError) {
      process.stderr.write(`petstore: invalid configuration: ${err.message}\n`)
      return 1
    }
    if (
      err instanceof UsageError ||
      (err instanceof TypeError && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS'))
    ) {
      process.stderr.write(`petstore: ${err.message}\n\n${USAGE}\n`)
      return 2
    }
    throw err
  }
}
