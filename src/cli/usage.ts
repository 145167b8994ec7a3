// How a `petstore` command says it failed: a usage error (exit 2) or a command error (exit 1),
// each one line on stderr; and its argument parser, which words errors in the same style.
import { type ParseArgsConfig, parseArgs } from 'node:util'

/** The command was called wrongly: one line, a pointer to the help, exit code 2. */
export class UsageError extends Error {}
/** The command was right but could not be carried out: one line, exit code 1. */
export class CommandError extends Error {}

/** node:util's parseArgs (strict: unknown options and stray arguments are refused). */
export function parse<T extends ParseArgsConfig>(config: T) {
  try {
    return parseArgs(config)
  } catch (err) {
    if (
      err instanceof TypeError &&
      'code' in err &&
      String(err.code).startsWith('ERR_PARSE_ARGS')
    ) {
      // In this command's style: lower case first, quoted "like this".
      const message = err.message.replaceAll(/'([^']*)'/g, '"$1"')
      throw new UsageError(message.charAt(0).toLowerCase() + message.slice(1))
    }
    throw err
  }
}
