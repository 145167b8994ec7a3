// What must happen once per start, before any request and before any worker exists: pending
// migrations, then D3's first-start key, shown once. `serve` does it itself; under --workers the
// primary does it once for all (cluster.ts).
import type { Config } from './config.ts'
import { issueInitialKeyIfNone } from './keys/issue.ts'
import type { Store } from './store/store.ts'

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
