// What a `petstore` command reads and writes besides its arguments: its standard input, its two
// output streams and its environment. bin/petstore.js runs commands with the process's own
// (processIo); the tests run them in-process with input and output of their own and an
// environment of their own, without a Node.js start per case, and show the real binary (exit
// codes, the process's streams) separately.
import { isatty } from 'node:tty'

/** Where a command's text goes: process.stdout or stderr, or a test's capture. */
export interface TextSink {
  write(text: string): unknown
}

/**
 * Where a command's input comes from: process.stdin (a stream is async-iterable) or a test's
 * text. Chunks are UTF-8 bytes or strings.
 */
export type TextSource = AsyncIterable<string | Uint8Array>

export interface CliIo {
  /** Read only by a command that asks for it (`pets … --key -` reads the API key from it). */
  readonly stdin: TextSource
  stdout: TextSink
  stderr: TextSink
  /** The configuration's variables (DATABASE_URL, …) and pets' PETSTORE_URL, PETSTORE_API_KEY. */
  env: NodeJS.ProcessEnv
  /**
   * Someone is there to answer a question: standard input and standard error are both a
   * terminal (`staging reset` asks before it deletes). False or absent: nothing is asked.
   */
  readonly interactive?: boolean
}

/** The running process's streams and environment: what `petstore` itself uses. */
export const processIo: CliIo = {
  // A getter: process.stdin opens the stream when first read, and only `--key -` needs it.
  get stdin() {
    return process.stdin
  },
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  // File descriptors, not process.stdin: that opens a stream, which only a question needs.
  get interactive() {
    return isatty(0) && isatty(2)
  },
}

/**
 * The first line of `stdin`, without its line end. Reading stops at the end of that line, so
 * what is typed at a terminal needs no Ctrl-D.
 */
export async function firstLine(stdin: TextSource): Promise<string> {
  const decoder = new TextDecoder()
  let text = ''
  for await (const chunk of stdin) {
    text += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true })
    if (text.includes('\n')) break
  }
  text += decoder.decode()
  return (text.split('\n', 1)[0] ?? '').replace(/\r$/, '')
}
