// Which environment variables loadConfig reads, found by reading them rather than from a list:
// the README's table and the unknown-settings check (D9) are both held to it.
import { loadConfig } from '../../src/config.ts'

/** Every environment variable loadConfig reads, in name order, seen through a recording env. */
export function variablesRead(): string[] {
  const read = new Set<string>()
  const recording = new Proxy<Record<string, string | undefined>>(
    {},
    {
      get(_target, name) {
        if (typeof name === 'string') read.add(name)
        return undefined
      },
    },
  )
  loadConfig(recording)
  return [...read].sort()
}
