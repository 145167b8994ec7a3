// What must happen once per start, before any request and before any worker exists: pending
// migrations, then D3's first-start key, shown once. `serve` does it itself; under --workers the
// primary does it once for all (cluster.ts).
import type { Config } from '../config.ts'
import { issueInitialKeyIfNone } from '../keys/issue.ts'
import { describeDatabase } from '../store/open.ts'
import type { Store } from '../store/store.ts'

/**
 * The one line a start logs before it listens: which store (engine and where, never a
 * password), how many processes, which environment. Under --workers the primary logs it.
 */
export function startLine(
  config: Pick<Config, 'database' | 'env'>,
  workers: number,
): { fields: Record<string, string | number>; message: string } {
  const database = describeDatabase(config.database)
  const processes = workers === 1 ? '1 process' : `${workers} worker processes`
  return {
    fields: { ...database.fields, workers, environment: config.env },
    message: `starting: ${database.text}; ${processes}; ${config.env}`,
  }
}

export function announceInitialKey(key: string): void {
  process.stderr.write(
    [
      '',
      'No API key existed, so one was created. It is shown only this once; keep it now:',
      '',
      `    ${key}`,
      '',
      'Send it as "Authorization: Bearer <key>". Manage keys with "npx petstore keys --help".',
      '',
      '',
    ].join('\n'),
  )
}

/**
 * What must happen once per start, before any request: pending migrations, then D3's
 * first-start key (returned, to be shown once), or undefined when a key exists.
 */
export async function prepareStore(
  store: Store,
  config: Pick<Config, 'env' | 'apiKeys'>,
): Promise<string | undefined> {
  await store.migrate()
  return issueInitialKeyIfNone(store.apiKeys, config.env, config.apiKeys)
}
