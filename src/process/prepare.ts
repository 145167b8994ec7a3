// What a start says and does once, apart from serving: its first log line, D3's first key (once
// every port is bound), and a word on keys of the environment without a prefix. `serve` does it
// itself; under --workers the primary does it once for all (cluster.ts).
import type { BaseLogger } from 'pino'
import type { Config } from '../config.ts'
import { parseApiKey } from '../contract/api-key.ts'
import { issueInitialKeyIfNone } from '../keys/issue.ts'
import { environmentKeyId } from '../keys/verifier.ts'
import { loggableEndpoint } from '../printable.ts'
import type { StagingFaults } from '../staging/faults.ts'
import { describeDatabase } from '../store/open.ts'
import type { ApiKeyRepository } from '../store/store.ts'
import { unknownSettingMessage } from '../unknown-settings.ts'

/**
 * The one line a start logs before it listens: which store (engine and where, never a
 * password), how many processes, which environment, then each setting that is on and changes
 * what the service does, so that a start with it and one without never look alike. Under
 * --workers the primary logs it.
 */
export function startLine(
  config: Pick<
    Config,
    'database' | 'env' | 'stagingFaults' | 'tracing' | 'probes' | 'migrate' | 'rateLimit'
  >,
  workers: number,
): { fields: Record<string, string | number>; message: string } {
  const database = describeDatabase(config.database)
  const processes = workers === 1 ? '1 process' : `${workers} worker processes`
  const on = settingsOn(config)
  return {
    fields: {
      ...database.fields,
      workers,
      environment: config.env,
      ...Object.fromEntries(on.map(({ field, value }) => [field, value])),
    },
    message: [
      `starting: ${database.text}`,
      processes,
      config.env,
      ...on.map(({ text }) => text),
    ].join('; '),
  }
}

interface SettingOn {
  field: string
  value: string | number
  text: string
}

/** The settings that are on and change behaviour, in the start line's order. */
function settingsOn(
  config: Pick<Config, 'stagingFaults' | 'tracing' | 'probes' | 'migrate' | 'rateLimit'>,
): SettingOn[] {
  const on: SettingOn[] = []
  const { stagingFaults, tracing, probes } = config
  if (stagingFaults !== undefined) {
    const value = describeFaults(stagingFaults)
    on.push({ field: 'stagingFaults', value, text: `staging faults ${value}` })
  }
  if (tracing !== undefined) {
    const ratio = tracing.sampler.endsWith('traceidratio') ? ` ${tracing.samplerRatio}` : ''
    const value = loggableEndpoint(tracing.endpoint)
    on.push({ field: 'tracing', value, text: `tracing to ${value} (${tracing.sampler}${ratio})` })
  }
  if (probes !== undefined) {
    const value = `${probes.host}:${probes.port}`
    on.push({ field: 'probes', value, text: `probes on ${value} (PROBE_PORT)` })
  }
  if (config.migrate === 'off') {
    on.push({ field: 'migrate', value: 'off', text: 'migrations off (PETSTORE_MIGRATE=off)' })
  }
  if (config.rateLimit === 0) {
    on.push({ field: 'rateLimit', value: 0, text: 'rate limit off (PETSTORE_RATE_LIMIT=0)' })
  }
  return on
}

/** PETSTORE_STAGING_FAULTS as it is written, from what was parsed. */
function describeFaults(faults: StagingFaults): string {
  const answers = faults.answers.map(({ status, rate }) => `${status}:${rate}`)
  const delay =
    faults.delay === undefined ? [] : [`delay:${faults.delay.ms}ms:${faults.delay.rate}`]
  return [...answers, ...delay].join(',')
}

/** D9: each variable of ours that is set and not read, once per start, with its nearest name. */
export function noticeUnknownSettings(
  config: Pick<Config, 'unknownSettings'>,
  log: Pick<BaseLogger, 'warn'>,
): void {
  for (const setting of config.unknownSettings) {
    log.warn(
      { variable: setting.name, ...(setting.suggestion ? { suggestion: setting.suggestion } : {}) },
      unknownSettingMessage(setting),
    )
  }
}

/** Where the first key is shown: stderr, or a test's stand-in. */
export interface KeyTerminal {
  isTTY?: boolean
  write(text: string): unknown
}

/** Said where no key exists and none may be made: how to make one. */
export const NO_KEY_MESSAGE =
  'no API key exists, and none is made where stderr is not a terminal (a key printed there would be kept with the logs): create one with "npx petstore keys create --name NAME" (in a container: docker exec <container> petstore keys create --name NAME), or give one in PETSTORE_API_KEYS'

/** The same for sqlite::memory:, which no other process can reach to make a key in. */
const NO_KEY_IN_MEMORY_MESSAGE =
  'no API key exists, and none is made where stderr is not a terminal (a key printed there would be kept with the logs); an in-memory database takes keys only from PETSTORE_API_KEYS'

/** Said when the first key could not be made (the store failed); the server serves on. */
export const FIRST_KEY_FAILED =
  'the first API key could not be made; make one with "petstore keys create --name NAME"'

/**
 * D3's first key, called once every port is bound, so that a start that fails has spent no key.
 * Created and printed only where stderr is a terminal, someone reading it: under a container
 * runtime or a service manager stderr is the log stream, and a live key would be kept in log
 * storage, so there none is made and one line says how to make one.
 */
export async function offerFirstKey(
  apiKeys: ApiKeyRepository,
  config: Pick<Config, 'env' | 'apiKeys' | 'database'>,
  log: Pick<BaseLogger, 'warn'>,
  terminal: KeyTerminal = process.stderr,
): Promise<void> {
  if (config.apiKeys.length > 0) return
  if (terminal.isTTY !== true) {
    const inMemory = config.database.engine === 'sqlite' && config.database.path === ':memory:'
    if ((await apiKeys.countActive()) === 0) {
      log.warn(inMemory ? NO_KEY_IN_MEMORY_MESSAGE : NO_KEY_MESSAGE)
    }
    return
  }
  const key = await issueInitialKeyIfNone(apiKeys, config.env)
  if (key === undefined) return
  log.warn('no API key existed; created one and printed it once on stderr')
  terminal.write(
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
 * Keys of PETSTORE_API_KEYS without the environment's prefix are accepted in every
 * environment and are not recognisable to a secret scanner; said once per start, per key, by
 * its id (never the key).
 */
export function noticeUnprefixedKeys(
  config: Pick<Config, 'apiKeys'>,
  log: Pick<BaseLogger, 'warn'>,
): void {
  for (const key of config.apiKeys) {
    if (parseApiKey(key).kind !== 'opaque') continue
    log.warn(
      { keyId: environmentKeyId(key) },
      'a key of PETSTORE_API_KEYS has no petstore_live_ or petstore_staging_ prefix: every environment accepts it, and secret scanners cannot recognise it; make structured keys with "petstore keys create --name NAME"',
    )
  }
}
