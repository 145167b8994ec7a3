// What a `petstore` command reads and writes besides its arguments: its two output streams and
// its environment. bin/petstore.js runs commands with the process's own (processIo); the tests
// run them in-process with captured output and an environment of their own, without a Node.js
// start per case, and show the real binary (exit codes, the process's streams) separately.

/** Where a command's text goes: process.stdout or stderr, or a test's capture. */
export interface TextSink {
  write(text: string): unknown
}

export interface CliIo {
  stdout: TextSink
  stderr: TextSink
  /** The configuration's variables (DATABASE_URL, …) and pets' PETSTORE_URL, PETSTORE_API_KEY. */
  env: NodeJS.ProcessEnv
}

/** The running process's streams and environment: what `petstore` itself uses. */
export const processIo: CliIo = {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
}
