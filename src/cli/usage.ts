// How a `petstore` command says it failed: a usage error (exit 2) or a command error (exit 1),
// each one line on stderr; and its argument parser, which words errors in the same style.
import { type ParseArgsConfig, parseArgs } from 'node:util'

/** The command was called wrongly: one line, a pointer to the help, exit code 2. */
export class UsageError extends Error {}
/** The command was right but could not be carried out: one line, exit code 1. */
export class CommandError extends Error {}

/** An option the command does not have: `--port`, and the value given with it, if any. */
export interface UnknownOption {
  /** As given: `--port`, `-p`. */
  rawName: string
  /** `9000` of `--port=9000` or `--port 9000`. */
  value: string | undefined
}

/**
 * node:util's parseArgs (strict: unknown options and stray arguments are refused). `explain`
 * may word the refusal of an unknown option itself (undefined: the usual message).
 */
export function parse<T extends ParseArgsConfig>(
  config: T,
  explain?: (option: UnknownOption) => string | undefined,
) {
  try {
    return parseArgs(config)
  } catch (err) {
    if (
      err instanceof TypeError &&
      'code' in err &&
      String(err.code).startsWith('ERR_PARSE_ARGS')
    ) {
      const unknown =
        err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? unknownOption(config) : undefined
      const explained = unknown && explain?.(unknown)
      if (explained) throw new UsageError(explained)
      // In this command's style: lower case first, quoted "like this".
      const message = err.message.replaceAll(/'([^']*)'/g, '"$1"')
      throw new UsageError(message.charAt(0).toLowerCase() + message.slice(1))
    }
    throw err
  }
}

/**
 * The first option the command does not have: the one strict parsing refused, as every option
 * before it passed. Read from the same arguments parsed leniently, which keeps the value that
 * follows it as a positional.
 */
function unknownOption(config: ParseArgsConfig): UnknownOption | undefined {
  const known = config.options ?? {}
  const { tokens } = parseArgs({ ...config, strict: false, tokens: true })
  const at = tokens.findIndex(
    (token) => token.kind === 'option' && !Object.hasOwn(known, token.name),
  )
  const token = tokens[at]
  if (token?.kind !== 'option') return undefined
  const next = tokens[at + 1]
  const value = token.value ?? (next?.kind === 'positional' ? next.value : undefined)
  return { rawName: token.rawName, value }
}
