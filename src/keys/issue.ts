// Issuing a key: generate, store the hash, hand the secret back exactly once.

import {
  type DeploymentEnv,
  generateApiKey,
  hashApiKey,
  keyHint,
  newKeyId,
} from '../contract/api-key.ts'
import type { ApiKeyRecord, ApiKeyRepository, NewApiKeyRecord } from '../store/store.ts'

export async function issueApiKey(
  apiKeys: ApiKeyRepository,
  env: DeploymentEnv,
  name: string,
): Promise<{ key: string; record: ApiKeyRecord }> {
  const key = generateApiKey(env)
  const record = await apiKeys.create(newKeyRecord(key, name))
  return { key, record }
}

function newKeyRecord(key: string, name: string): NewApiKeyRecord {
  return { id: newKeyId(), name, hint: keyHint(key), hash: hashApiKey(key) }
}

/**
 * D3: a first start with no key at all (none in the store, none in the environment) creates
 * one and returns it, to be shown once; undefined when any key exists. Checking and creating are
 * one step of the store's, so instances starting together on an empty database make one key.
 */
export async function issueInitialKeyIfNone(
  apiKeys: ApiKeyRepository,
  env: DeploymentEnv,
  environmentKeys: readonly string[],
): Promise<string | undefined> {
  if (environmentKeys.length > 0) return undefined
  const key = generateApiKey(env)
  const record = await apiKeys.createFirst(newKeyRecord(key, 'initial'))
  return record === undefined ? undefined : key
}
