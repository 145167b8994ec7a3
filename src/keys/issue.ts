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
 * D3: the first key, made and returned (to be shown once) when the store has no active key;
 * undefined when it has one. Checking and creating are one step of the store's, so instances
 * starting together on an empty database make one key. (Keys from the environment are the
 * caller's to weigh: process/prepare.ts makes none when there are some.)
 */
export async function issueInitialKeyIfNone(
  apiKeys: ApiKeyRepository,
  env: DeploymentEnv,
): Promise<string | undefined> {
  const key = generateApiKey(env)
  const record = await apiKeys.createFirst(newKeyRecord(key, 'initial'))
  return record === undefined ? undefined : key
}
