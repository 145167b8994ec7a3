// `petstore pets list|add|get`: the API over HTTP, for operators' smoke tests against any
// deployment (D18). It is a user of the client SDK (client/src), with no HTTP code of its own,
// so a smoke test also exercises what clients run: paging by Link, retries, Idempotency-Key.
import { randomBytes } from 'node:crypto'
import { type Pet, type PetStatus, Petstore, PetstoreError } from '../../client/src/index.ts'
import { PetStatus as PetStatusSchema } from '../contract/schemas.ts'
import { type CliIo, firstLine, type TextSink, type TextSource } from './io.ts'
import { formatTable } from './table.ts'
import { CommandError, parse, UsageError } from './usage.ts'

const STATUSES: readonly string[] = PetStatusSchema.enum

/** Options every subcommand takes. */
const COMMON = {
  url: { type: 'string' },
  key: { type: 'string' },
  'allow-insecure-http': { type: 'boolean', default: false },
  json: { type: 'boolean', default: false },
  trace: { type: 'boolean', default: false },
} as const

/** What `--key KEY` costs, said on stderr each time it is used (`--key -` is the way out). */
const KEY_IN_ARGV_WARNING =
  'petstore: warning: --key puts the key in the process list and shell history; set PETSTORE_API_KEY instead, or give it on standard input with --key -\n'

type Output = (pets: AsyncIterable<Pet> | Pet[]) => Promise<void>

/**
 * Checks the arguments and returns what carries the command out. `io.env` gives PETSTORE_URL and
 * PETSTORE_API_KEY (the service's own configuration plays no part: the service may be anywhere),
 * `io.stdin` the key with `--key -`; the pets go to `io.stdout`.
 */
export function petsCommand(args: string[], io: CliIo): () => Promise<void> {
  const [action, ...rest] = args
  switch (action) {
    case 'list': {
      const { values } = parse({
        args: rest,
        options: {
          ...COMMON,
          status: { type: 'string' },
          limit: { type: 'string' },
          all: { type: 'boolean', default: false },
        },
      })
      const connect = client(values, io)
      const call = traced(values.trace, io)
      const params = {
        ...(values.status === undefined ? {} : { status: status(values.status) }),
        ...(values.limit === undefined ? {} : { limit: limit(values.limit) }),
      }
      return attempt(async () => {
        const petstore = await connect()
        if (values.all) return print(values.json, io.stdout)(petstore.pets.list(params, call()))
        const page = await petstore.pets.listPage(params, call())
        await print(values.json, io.stdout)(page.pets)
        if (page.nextCursor !== undefined && !values.json) {
          io.stderr.write('More pets follow: --all lists every page.\n')
        }
      })
    }
    case 'add': {
      const { values } = parse({
        args: rest,
        options: {
          ...COMMON,
          name: { type: 'string' },
          'category-id': { type: 'string' },
          status: { type: 'string' },
          'idempotency-key': { type: 'string' },
        },
      })
      if (values.name === undefined || values['category-id'] === undefined) {
        throw new UsageError('pets add needs --name NAME and --category-id ID')
      }
      const connect = client(values, io)
      const call = traced(values.trace, io)
      const newPet = {
        name: values.name,
        categoryId: positiveInteger('--category-id', values['category-id']),
        ...(values.status === undefined ? {} : { status: status(values.status) }),
      }
      const key = values['idempotency-key']
      return attempt(async () => {
        const petstore = await connect()
        const pet = await petstore.pets.create(newPet, {
          ...call(),
          ...(key === undefined ? {} : { idempotencyKey: key }),
        })
        await print(values.json, io.stdout)([pet])
      })
    }
    case 'get': {
      const { values, positionals } = parse({ args: rest, options: COMMON, allowPositionals: true })
      const [id, ...extra] = positionals
      if (id === undefined || extra.length > 0) {
        throw new UsageError("pets get needs one argument: the pet's id")
      }
      const petId = positiveInteger('the id', id)
      const connect = client(values, io)
      const call = traced(values.trace, io)
      return attempt(async () => {
        const petstore = await connect()
        // getPet is deprecated (D7); this command exists for as long as the operation does.
        await print(values.json, io.stdout)([await petstore.pets.get(petId, call())])
      })
    }
    case undefined:
      throw new UsageError('pets needs a subcommand: list, add or get')
    default:
      throw new UsageError(`unknown pets subcommand "${action}"; it is list, add or get`)
  }
}

/**
 * With --trace, the call's options carry a new W3C `traceparent` (a random trace id and parent
 * id, sampled), and its trace id is said on stderr when the call is made: the service's log line
 * of each request of the command has it as `traceId`, so that a smoke test's requests are found
 * in the logs (and in traces, where the service traces).
 */
function traced(trace: boolean | undefined, io: CliIo): () => { traceparent?: string } {
  if (trace !== true) return () => ({})
  return () => {
    const traceId = randomBytes(16).toString('hex')
    io.stderr.write(`trace ${traceId}\n`)
    return { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` }
  }
}

/**
 * The SDK's client for --url/PETSTORE_URL and --key/PETSTORE_API_KEY, once the command runs: the
 * address is checked now, and `--key -` is read from stdin then. `--key KEY` is taken, as
 * scripts use it, with a warning when the command runs (not before a usage error).
 */
function client(
  values: {
    url?: string | undefined
    key?: string | undefined
    'allow-insecure-http'?: boolean | undefined
  },
  io: CliIo,
): () => Promise<Petstore> {
  const baseUrl = values.url ?? io.env.PETSTORE_URL
  if (baseUrl === undefined || baseUrl === '') {
    throw new UsageError(
      "pets needs the service's address: --url or PETSTORE_URL (e.g. http://127.0.0.1:8080/v1)",
    )
  }
  const allowInsecureHttp = values['allow-insecure-http'] === true
  if (values.key === '-') {
    // The address first, with a stand-in key, so that a wrong --url is said before any wait
    // for standard input; the client that is used gets the key read.
    newClient(baseUrl, 'unread', allowInsecureHttp)
    return async () => newClient(baseUrl, await keyFromStdin(io.stdin), allowInsecureHttp)
  }
  const apiKey = values.key ?? io.env.PETSTORE_API_KEY
  if (apiKey === undefined || apiKey === '') {
    throw new UsageError(
      'pets needs an API key: PETSTORE_API_KEY, or --key - to read it from standard input',
    )
  }
  const petstore = newClient(baseUrl, apiKey, allowInsecureHttp)
  return async () => {
    if (values.key !== undefined) io.stderr.write(KEY_IN_ARGV_WARNING)
    return petstore
  }
}

function newClient(baseUrl: string, apiKey: string, allowInsecureHttp: boolean): Petstore {
  try {
    return new Petstore({ baseUrl, apiKey, allowInsecureHttp, userAgent: 'petstore-cli' })
  } catch (err) {
    // The SDK refuses a bad address at construction (a TypeError naming it and, for plain http
    // to another machine, its option), said in the command's terms.
    if (err instanceof TypeError) {
      throw new UsageError(
        err.message
          .replace(/^Petstore: baseUrl/, '--url (or PETSTORE_URL)')
          .replace('allowInsecureHttp: true', '--allow-insecure-http'),
      )
    }
    throw err
  }
}

/**
 * `--key -`: the first line of standard input, trimmed. Reading stops at the end of that line,
 * so a key typed at a terminal needs no Ctrl-D.
 */
async function keyFromStdin(stdin: TextSource): Promise<string> {
  const key = (await firstLine(stdin)).trim()
  if (key === '') {
    throw new UsageError('--key - reads the API key from standard input, whose first line is empty')
  }
  return key
}

function status(value: string): PetStatus {
  if (!STATUSES.includes(value)) {
    throw new UsageError(`--status must be available, pending or sold (got "${value}")`)
  }
  return value as PetStatus
}

function limit(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > 100) {
    throw new UsageError(`--limit must be a whole number from 1 to 100 (got "${value}")`)
  }
  return Number(value)
}

function positiveInteger(what: string, value: string): number {
  const n = Number(value)
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) {
    throw new UsageError(`${what} must be a whole number from 1 (got "${value}")`)
  }
  return n
}

/** The call, with the SDK's errors as the command's one line (exit 1). */
function attempt(work: () => Promise<void>): () => Promise<void> {
  return async () => {
    try {
      await work()
    } catch (err) {
      if (err instanceof PetstoreError) throw new CommandError(errorLine(err))
      throw err
    }
  }
}

/** e.g. `404 not_found: no pet with id 7 (request id 3f…)`; `network_error: …` for no answer. */
function errorLine(err: PetstoreError): string {
  const status = err.status === 0 ? '' : `${err.status} `
  const request = err.requestId === undefined ? '' : ` (request id ${err.requestId})`
  return `${status}${err.code}: ${err.message}${request}`
}

/** JSON lines as pets come (a long --all streams), or a table once all have come. */
function print(json: boolean, stdout: TextSink): Output {
  return async (pets) => {
    if (json) {
      for await (const pet of pets) stdout.write(`${JSON.stringify(pet)}\n`)
      return
    }
    const rows: string[][] = []
    for await (const pet of pets) {
      rows.push([String(pet.id), pet.name, String(pet.categoryId), pet.status ?? ''])
    }
    if (rows.length === 0) stdout.write('No pets.\n')
    else stdout.write(formatTable(['ID', 'NAME', 'CATEGORY', 'STATUS'], rows))
  }
}
