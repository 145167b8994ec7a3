// Runs a `petstore` command in the test's own process: main() with captured output and an
// environment of its own. A child process costs ~0.3–0.7 s of CPU to start Node.js and load the
// modules; this costs none, so the many cases about arguments, messages and exit codes run here,
// and helpers/process.ts's runCli keeps the few where the real process matters (bin/petstore.js,
// its streams, exits that end the process). Not for a `serve` that gets as far as starting: it
// listens, and exits the process; its argument and configuration errors come before that.
import { Readable } from 'node:stream'
import { main } from '../../src/cli/petstore.ts'
import type { CommandResult } from './process.ts'

/**
 * Runs `petstore ...args` with `env` as its configuration (nothing of this process's reaches
 * loadConfig) and `stdin` as its standard input, to completion; the exit code is what main
 * returns. `interactive`: as if standard input and standard error were a terminal (someone
 * there to answer a question); not unless given. Libraries read their own variables from the process as they would in the real
 * command: `pg` fills what a DATABASE_URL leaves out (password, SSL mode, user) from
 * PGPASSWORD, PGSSLMODE, USER.
 */
export async function runMain(
  args: string[],
  env: Record<string, string>,
  stdin = '',
  { interactive = false }: { interactive?: boolean } = {},
): Promise<CommandResult> {
  let stdout = ''
  let stderr = ''
  const io = {
    stdin: Readable.from([Buffer.from(stdin)]),
    stdout: {
      write(text: string) {
        stdout += text
      },
    },
    stderr: {
      write(text: string) {
        stderr += text
      },
    },
    env: { ...env },
    interactive,
  }
  const code = await main(args, io)
  return { code, stdout, stderr }
}
