// Issuing a key: generate, store the hash, hand the secret back exactly once.

import {
  type DeploymentEnv,
  generateApiKey,
  hashApiKey,
  keyHint,
  newKeyId,
} from '../contract/api-key.ts'
import type { ApiKeyRecord, ApiKeyRepository } from '../store/store.ts'

export async function issueApiKey(
  apiKeys: ApiKeyRepository,
  env: DeploymentEnv,
  name: string,
): Promise<{ key: string; record: ApiKeyRecord }> {
  const key = generateApiKey(env)
  const record = await apiKeys.create({
    id: newKeyId(),
    name,
    hint: keyHint(key),
    hash: hashApiKey(key),
  })
  return { key, record }
}

/**
 * D3: a first start with no key at all (none in the store, none in the environment) creates
 * one and returns it, to be shown once. Returns undefined when any key exists.
 */
export async function issueInitialKeyIfNone(
  apiKeys: ApiKeyRepository,
  env: DeploymentEnv,
  environmentKeys: readonly string[],
): Promise<string | undefined> {
  if (environmentKeys.length > 0 || (await apiKeys.countActive()) > 0) return undefined
  return (await issueApiKey(apiKeys, env, 'initial')).key
}
