// A program from a Debian package that some tests start themselves (PgBouncer, redis-server):
// where it is, and the one line that skips those tests where it is not, or fails them where CI
// requires it.
import { accessSync, constants } from 'node:fs'
import { delimiter, join } from 'node:path'

export interface DebianProgram {
  /** Its path, or undefined where it is not installed. */
  binary(): string | undefined
  /** The one line said where it is absent. */
  absentLine(): string
  /** Undefined when it is there, else the reason to skip; throws when it is required. */
  skipReason(): string | undefined
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

export function debianProgram(options: {
  /** The command's name, looked for on the PATH after `candidates`. */
  name: string
  /** Where Debian installs it. */
  candidates: string[]
  /** A variable that names another binary, if set. */
  override?: string | undefined
  /** The absent line, e.g. "PgBouncer is not installed (Debian package pgbouncer); …". */
  absent: string
  /** The variable CI sets to turn absence into a failure, and whether it is set. */
  required: { variable: string; set: boolean }
}): DebianProgram {
  const binary = () => {
    if (options.override !== undefined && options.override !== '') {
      return executable(options.override) ? options.override : undefined
    }
    const onPath = (process.env.PATH ?? '').split(delimiter).map((dir) => join(dir, options.name))
    return [...options.candidates, ...onPath].find(executable)
  }
  const absentLine = () => options.absent
  return {
    binary,
    absentLine,
    skipReason: () => {
      if (binary() !== undefined) return undefined
      if (options.required.set) {
        throw new Error(`${absentLine()}, but ${options.required.variable}=1`)
      }
      return absentLine()
    },
  }
}
