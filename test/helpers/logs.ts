// Reads a service process's stdout, or an app's log stream, as the JSON log lines it is (D8).
import { Writable } from 'node:stream'

export interface LogLine {
  level: number
  time: number
  pid: number
  msg?: string
  [field: string]: unknown
}

export const WARN = 40

export function logLines(stdout: string): LogLine[] {
  return stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as LogLine)
}

/** The metrics listener's URL, from its "metrics listening at …" line (D17). */
export function metricsUrlIn(stdout: string): string | undefined {
  const line = logLines(stdout).find((l) => /^metrics listening at /.test(l.msg ?? ''))
  return typeof line?.url === 'string' ? line.url : undefined
}

/** A log stream for an app under test (Fastify's `logger.stream`), read back as lines. */
export function memoryLog(): { stream: Writable; lines(): LogLine[] } {
  const chunks: string[] = []
  const stream = new Writable({
    write(chunk, _encoding, done) {
      chunks.push(String(chunk))
      done()
    },
  })
  return { stream, lines: () => logLines(chunks.join('')) }
}
