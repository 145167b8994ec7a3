// Configuration (D9): read from the environment once, validated, frozen. Nothing else in the
// code reads process.env. A bad value stops the start with one line naming the variable.
import { readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { type DeploymentEnv, parseApiKey } from './contract/api-key.ts'
import {
  API_KEY_MAX_LENGTH,
  AUTHORIZATION_MAX_LENGTH,
  IDEMPOTENCY_TTL_MAX_SECONDS,
} from './contract/limits.ts'
import { FaultsSyntaxError, parseFaults, type StagingFaults } from './staging/faults.ts'
import { knownVariables, type UnknownSetting, unknownSettings } from './unknown-settings.ts'

export type DatabaseLocation =
  | { engine: 'sqlite'; path: string }
  /**
   * poolSize: the most connections one process holds (DATABASE_POOL_SIZE); pooler: what sits
   * between the service and PostgreSQL (DATABASE_POOLER, D19).
   */
  | { engine: 'postgres'; url: string; poolSize: number; pooler: DatabasePooler }

/**
 * D19: `none`, a direct connection (or a session-mode pooler): named prepared statements and
 * the statement timeout as a startup parameter. `transaction`: a transaction-mode pooler such
 * as PgBouncer, where neither survives; unnamed statements, and the role's statement timeout.
 */
export const DATABASE_POOLERS = ['none', 'transaction'] as const
/**
 * D27: `auto`, every command applies pending migrations first; `off`, only `petstore migrate`
 * does, and the others refuse a database that lacks one (migrations as a step of their own).
 */
export const MIGRATE_MODES = ['auto', 'off'] as const
export type MigrateMode = (typeof MIGRATE_MODES)[number]
export type DatabasePooler = (typeof DATABASE_POOLERS)[number]

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

export interface Config {
  port: number
  host: string
  database: DatabaseLocation
  /** D27: whether this process applies pending migrations (PETSTORE_MIGRATE). */
  migrate: MigrateMode
  env: DeploymentEnv
  /** Keys given by the environment (opaque strings of 32+ characters, or CLI-format keys). */
  apiKeys: readonly string[]
  /** Requests a minute per key; 0 turns rate limiting off. */
  rateLimit: number
  /**
   * D3: failed authentications a minute from one client address before that address's requests
   * without a known valid key get 429 without asking the store; 0 turns the limit off.
   */
  authFailureLimit: number
  /** D3: how long a key verified (or refused) by the store is believed without asking again (ms); 0: always ask. */
  keyCacheMs: number
  logLevel: LogLevel
  /** Browser origins allowed by CORS; empty turns CORS off (D13). */
  corsOrigins: readonly string[]
  /**
   * Addresses and CIDR ranges of the balancers in front (PETSTORE_TRUSTED_PROXIES): the client
   * address is read from `X-Forwarded-For` only as far back as these hops; empty: the peer's.
   */
  trustedProxies: readonly string[]
  /**
   * Where instances share rate-limit and failed-authentication counters (D12, D3); undefined
   * keeps them in this process.
   */
  redis: RedisSettings | undefined
  /** D16: the event loop delay (ms) past which requests are shed with 503; 0 turns it off. */
  maxEventLoopDelayMs: number
  /** What one client may hold of this process (D16). */
  connections: ConnectionLimits
  /** D14: an Idempotency-Key's record lives this long after the first request (seconds). */
  idempotencyTtlSeconds: number
  /** D17: where Prometheus scrapes `/metrics`, never the API's port; undefined: off. */
  metrics: SideListener | undefined
  /** D20: where orchestrators probe /healthz and /readyz apart from the API's connections; undefined: off. */
  probes: SideListener | undefined
  /** D20: PROBE_PORT's /healthz is 503 once the API's event loop has not turned for this long (ms). */
  livenessStallMs: number
  /** D23: where and how traces are exported (the OTEL_ variables); undefined: tracing is off. */
  tracing: TracingConfig | undefined
  /** D29: staging's random faults (PETSTORE_STAGING_FAULTS); undefined: none. Never in production. */
  stagingFaults: StagingFaults | undefined
  /** D9: variables set in the service's namespaces that it does not read, said once at start. */
  unknownSettings: readonly UnknownSetting[]
}

/**
 * D23: the OpenTelemetry variables the service interprets. The exporter reads its own
 * (endpoint, headers, timeout, compression) and the resource detector OTEL_SERVICE_NAME and
 * OTEL_RESOURCE_ATTRIBUTES, as the specification says; they are checked here so that a bad
 * value stops the start like any other.
 */
export interface TracingConfig {
  /** Where spans are sent: the traces endpoint as the exporter builds it. */
  endpoint: string
  protocol: TracesProtocol
  sampler: TracesSampler
  /** The ratio of a `traceidratio` sampler, 0 to 1. */
  samplerRatio: number
  /** How long finished spans wait to be sent together (OTEL_BSP_SCHEDULE_DELAY, ms). */
  scheduleDelayMs: number
}

export const TRACES_PROTOCOLS = ['http/protobuf', 'http/json'] as const
export type TracesProtocol = (typeof TRACES_PROTOCOLS)[number]

/** The samplers of the OpenTelemetry specification's OTEL_TRACES_SAMPLER that need no remote. */
export const TRACES_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const
export type TracesSampler = (typeof TRACES_SAMPLERS)[number]

/** D17, D20: a listener apart from the API's (METRICS_PORT/METRICS_HOST, PROBE_PORT/PROBE_HOST). */
export interface SideListener {
  port: number
  host: string
}

/** D16: bounds on connections, so that memory and time never depend on what a client does. */
export interface ConnectionLimits {
  /** Open connections past this are closed at once (PETSTORE_MAX_CONNECTIONS). */
  maxConnections: number
  /** A request's headers must arrive within this (PETSTORE_HEADERS_TIMEOUT_MS). */
  headersTimeoutMs: number
  /** A whole request, headers and body, must arrive within this (PETSTORE_REQUEST_TIMEOUT_MS). */
  requestTimeoutMs: number
}

export interface RedisSettings {
  /** redis:// or rediss:// (TLS); may carry a password, so it is never logged as given. */
  url: string
  /** Prepended to every key the service writes, so deployments can share one Redis. */
  prefix: string
}

export class ConfigError extends Error {
  override name = 'ConfigError'
}

type Env = Record<string, string | undefined>

/** The variables, their defaults and meaning; docs/configuration.md's table is checked against this. */
export const configDefaults = {
  PORT: '8080',
  HOST: '127.0.0.1',
  DATABASE_URL: 'sqlite:./data/petstore.db',
  DATABASE_POOL_SIZE: '10',
  DATABASE_POOLER: 'none',
  PETSTORE_MIGRATE: 'auto',
  PETSTORE_ENV: 'production',
  PETSTORE_STAGING_FAULTS: 'off',
  PETSTORE_RATE_LIMIT: '600',
  PETSTORE_AUTH_FAILURE_LIMIT: '30',
  PETSTORE_KEY_CACHE_MS: '1000',
  PETSTORE_REDIS_PREFIX: 'petstore:',
  LOG_LEVEL: 'info',
  PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '200',
  PETSTORE_MAX_CONNECTIONS: '4096',
  PETSTORE_HEADERS_TIMEOUT_MS: '10000',
  PETSTORE_REQUEST_TIMEOUT_MS: '30000',
  PETSTORE_IDEMPOTENCY_TTL: '86400',
  METRICS_PORT: '9464',
  PROBE_PORT: 'off',
  PETSTORE_LIVENESS_STALL_MS: '10000',
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
  OTEL_SERVICE_NAME: 'petstore',
  OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
  OTEL_TRACES_SAMPLER_ARG: '0.1',
  OTEL_BSP_SCHEDULE_DELAY: '5000',
} as const

/** The variables loadConfig reads that have no default; configDefaults names the others. */
const VARIABLES_WITHOUT_DEFAULT = [
  'PETSTORE_API_KEYS',
  'PETSTORE_API_KEYS_FILE',
  'PETSTORE_CORS_ORIGINS',
  'PETSTORE_TRUSTED_PROXIES',
  'REDIS_URL',
  'METRICS_HOST',
  'PROBE_HOST',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
  'OTEL_SDK_DISABLED',
] as const

/** Every variable the service reads (test/config.test.ts checks it against loadConfig's reads). */
export const KNOWN_VARIABLES: ReadonlySet<string> = knownVariables([
  ...Object.keys(configDefaults),
  ...VARIABLES_WITHOUT_DEFAULT,
])

function read(env: Env, name: keyof typeof configDefaults): string {
  const value = env[name]?.trim()
  return value === undefined || value === '' ? configDefaults[name] : value
}

function integer(name: string, raw: string, min: number, max: number): number {
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max} (got "${raw}")`)
  }
  return Number(raw)
}

/**
 * HOST: an IPv4 or IPv6 literal (`::1`, without brackets) or a host name per RFC 1123 §2.1
 * (dot-separated labels of 1–63 letters, digits and inner hyphens, 253 characters at most).
 * A name whose last label is all digits is refused, as §2.1 says: it is a mistyped IPv4 address
 * (`127.0.0.256`), not a name. Whether it is an address of this machine is learnt at listen.
 */
function host(raw: string, name = 'HOST'): string {
  if (isIP(raw) !== 0) return raw
  const bare = raw.replace(/\.$/, '') // a fully qualified name may end in a dot
  const labels = bare.split('.')
  const isName =
    bare.length <= 253 &&
    labels.every((label) => /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/.test(label)) &&
    !/^\d+$/.test(labels.at(-1) ?? '')
  if (!isName) {
    throw new ConfigError(
      `${name} must be an IP address (0.0.0.0, ::, 127.0.0.1) or a host name (got ${JSON.stringify(raw)})`,
    )
  }
  return raw
}

function oneOf<T extends string>(name: string, raw: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(`${name} must be one of ${allowed.join(', ')} (got "${raw}")`)
  }
  return raw as T
}

function list(raw: string | undefined): string[] {
  return (raw ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '')
}

function parseDatabase(env: Env): DatabaseLocation {
  const raw = read(env, 'DATABASE_URL')
  // Checked whatever the engine: a bad value stops the start even where it is not used yet.
  const pool = poolSize(env)
  const pooler = oneOf('DATABASE_POOLER', read(env, 'DATABASE_POOLER'), DATABASE_POOLERS)
  if (raw.startsWith('sqlite:')) {
    const path = raw.slice('sqlite:'.length)
    if (path === '')
      throw new ConfigError('DATABASE_URL sqlite: needs a path, e.g. sqlite:./data/petstore.db')
    return { engine: 'sqlite', path }
  }
  if (/^postgres(ql)?:\/\//.test(raw)) {
    return { engine: 'postgres', url: postgresUrl(raw), poolSize: pool, pooler }
  }
  throw new ConfigError(
    'DATABASE_URL must be sqlite:<path>, sqlite::memory: or postgres://user@host:port/database',
  )
}

/** The URL itself, checked; the error never repeats it, since it may carry a password. */
function postgresUrl(raw: string): string {
  const url = URL.canParse(raw) ? new URL(raw) : undefined
  // A Unix socket is given as ?host=/path, so an empty host is fine only with that.
  const host = url?.hostname || url?.searchParams.get('host')
  if (url === undefined || !host || url.pathname.length < 2) {
    throw new ConfigError(
      'DATABASE_URL is not a valid PostgreSQL URL; expected postgres://user[:password]@host[:port]/database',
    )
  }
  return raw
}

function poolSize(env: Env): number {
  return integer('DATABASE_POOL_SIZE', read(env, 'DATABASE_POOL_SIZE'), 1, 1000)
}

/**
 * D9: the keys, from PETSTORE_API_KEYS or from the file PETSTORE_API_KEYS_FILE names (a mounted
 * Secret, kept out of the process's environment, which `ps e`, /proc and crash reports show).
 * In the file, keys are separated by commas or line breaks. Both set is refused: which one
 * wins would be a guess.
 */
function apiKeysSource(env: Env): { name: string; keys: string[] } {
  const path = env.PETSTORE_API_KEYS_FILE?.trim()
  if (path === undefined || path === '') {
    return { name: 'PETSTORE_API_KEYS', keys: list(env.PETSTORE_API_KEYS) }
  }
  if (list(env.PETSTORE_API_KEYS).length > 0) {
    throw new ConfigError('PETSTORE_API_KEYS and PETSTORE_API_KEYS_FILE are both set; set one')
  }
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? String(error)
    throw new ConfigError(`PETSTORE_API_KEYS_FILE ${path} cannot be read (${code})`)
  }
  return { name: 'PETSTORE_API_KEYS_FILE', keys: list(text.replace(/\r?\n/g, ',')) }
}

function parseApiKeys(env: Env, deployment: DeploymentEnv): string[] {
  const { name, keys } = apiKeysSource(env)
  keys.forEach((key, i) => {
    const where = `${name} entry ${i + 1}`
    if (key.length < 32 || key.length > API_KEY_MAX_LENGTH || /\s/.test(key)) {
      throw new ConfigError(
        `${where} must be 32 to ${API_KEY_MAX_LENGTH} characters with no white space (Authorization: Bearer <key> is at most ${AUTHORIZATION_MAX_LENGTH})`,
      )
    }
    const parsed = parseApiKey(key)
    if (parsed.kind === 'corrupt')
      throw new ConfigError(`${where} has a petstore prefix but a wrong checksum`)
    if (parsed.kind === 'structured' && parsed.env !== deployment) {
      throw new ConfigError(`${where} is a ${parsed.env} key; this service runs as ${deployment}`)
    }
  })
  return keys
}

/** PETSTORE_TRUSTED_PROXIES: IP addresses and CIDR ranges (`10.0.0.0/8`, `fd00::/8`). */
function parseTrustedProxies(env: Env): string[] {
  const entries = list(env.PETSTORE_TRUSTED_PROXIES)
  for (const entry of entries) {
    const [address = '', prefix, ...extra] = entry.split('/')
    const version = isIP(address)
    const bits = version === 6 ? 128 : 32
    const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits)
    if (version === 0 || !prefixOk || extra.length > 0) {
      throw new ConfigError(
        `PETSTORE_TRUSTED_PROXIES entry "${entry}" must be an IP address or a CIDR range like 10.0.0.0/8`,
      )
    }
    // Every address trusted would let any client choose the address logged for it.
    if (Number(prefix) === 0) {
      throw new ConfigError(
        `PETSTORE_TRUSTED_PROXIES entry "${entry}" trusts every address; name the balancers' addresses or subnet`,
      )
    }
  }
  refuseTrustingEveryone(entries)
  return entries
}

/** A trusted entry as the addresses it covers, first to last, as numbers. */
interface AddressRange {
  entry: string
  first: bigint
  last: bigint
}

const IPV4_SPACE = 1n << 32n
const IPV6_SPACE = 1n << 128n
/** ::ffff:0:0/96: each IPv4 address as a dual-stack socket gives it (`::ffff:192.0.2.1`). */
const MAPPED_FIRST = 0xffff_0000_0000n
const MAPPED_LAST = 0xffff_ffff_ffffn

/**
 * D3, D8: entries that together cover every IPv4 or every IPv6 address (`0.0.0.0/1,128.0.0.0/1`)
 * trust everyone as a /0 does. IPv6 ranges over the IPv4-mapped block count for IPv4 too: a
 * dual-stack socket gives each IPv4 peer in that form (rate-limit/client-address.ts).
 */
function refuseTrustingEveryone(entries: readonly string[]): void {
  const ranges = entries.map((entry) => ({ entry, ...addressRange(entry) }))
  const v4 = ranges.flatMap((range) => (range.version === 4 ? [range] : mappedPart(range)))
  const v6 = ranges.filter((range) => range.version === 6)
  for (const [family, covering, space] of [
    ['IPv6', v6, IPV6_SPACE], // first: a list that covers it covers the mapped IPv4 as well
    ['IPv4', v4, IPV4_SPACE],
  ] as const) {
    if (!coversAll(covering, space)) continue
    const named = [...new Set(covering.map((range) => `"${range.entry}"`))]
    const which =
      named.length === 1 ? `entry ${named[0]} trusts` : `entries ${named.join(', ')} trust`
    throw new ConfigError(
      `PETSTORE_TRUSTED_PROXIES ${which} every ${family} address; name the balancers' addresses or subnet`,
    )
  }
}

/** The first and last address of a checked entry (`10.0.0.0/8`, `fd00::1`, `fe80::1%eth0`). */
function addressRange(entry: string): { version: 4 | 6; first: bigint; last: bigint } {
  const [address = '', prefix] = entry.split('/')
  const ip = address.split('%')[0] ?? ''
  const version = isIP(ip) === 4 ? 4 : 6
  const bits = version === 4 ? 32 : 128
  const hostBits = BigInt(bits - (prefix === undefined ? bits : Number(prefix)))
  const value = version === 4 ? ipv4Value(ip) : ipv6Value(ip)
  const first = (value >> hostBits) << hostBits
  return { version, first, last: first + (1n << hostBits) - 1n }
}

function ipv4Value(address: string): bigint {
  return address.split('.').reduce((value, part) => (value << 8n) | BigInt(part), 0n)
}

/** A valid IPv6 address (net.isIP) as a number: `::` expanded, an embedded IPv4 as two groups. */
function ipv6Value(address: string): bigint {
  const groupsOf = (part: string): bigint[] =>
    part === ''
      ? []
      : part.split(':').flatMap((group) => {
          if (!group.includes('.')) return [BigInt(`0x${group}`)]
          const value = ipv4Value(group)
          return [value >> 16n, value & 0xffffn]
        })
  const [head = '', tail = ''] = address.split('::')
  const before = groupsOf(head)
  const after = groupsOf(tail)
  const missing = Array<bigint>(8 - before.length - after.length).fill(0n)
  return [...before, ...missing, ...after].reduce((value, group) => (value << 16n) | group, 0n)
}

/** The IPv4 addresses an IPv6 range covers in their mapped form, if any. */
function mappedPart(range: AddressRange): AddressRange[] {
  if (range.last < MAPPED_FIRST || range.first > MAPPED_LAST) return []
  const first = (range.first > MAPPED_FIRST ? range.first : MAPPED_FIRST) - MAPPED_FIRST
  const last = (range.last < MAPPED_LAST ? range.last : MAPPED_LAST) - MAPPED_FIRST
  return [{ entry: range.entry, first, last }]
}

/** Whether the ranges, merged, leave no address from 0 to space - 1 out. */
function coversAll(ranges: readonly AddressRange[], space: bigint): boolean {
  const sorted = [...ranges].sort((a, b) => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0))
  let next = 0n // the first address not yet covered
  for (const { first, last } of sorted) {
    if (first > next) return false
    if (last + 1n > next) next = last + 1n
  }
  return next >= space
}

function parseOrigins(env: Env): string[] {
  const origins = list(env.PETSTORE_CORS_ORIGINS)
  for (const origin of origins) {
    if (origin === '*') continue
    if (!URL.canParse(origin) || new URL(origin).origin !== origin) {
      throw new ConfigError(
        `PETSTORE_CORS_ORIGINS entry "${origin}" must be an origin like https://app.example.com, or *`,
      )
    }
  }
  return origins
}

/** REDIS_URL, checked; like DATABASE_URL, the error never repeats it (it may carry a password). */
function parseRedis(env: Env): RedisSettings | undefined {
  // Checked even without REDIS_URL: a bad value stops the start before it is ever used.
  const prefix = read(env, 'PETSTORE_REDIS_PREFIX')
  if (!/^[\x21-\x7e]{1,100}$/.test(prefix)) {
    throw new ConfigError(
      'PETSTORE_REDIS_PREFIX must be 1 to 100 visible ASCII characters, without white space',
    )
  }
  const raw = env.REDIS_URL?.trim()
  if (raw === undefined || raw === '') return undefined
  const url = URL.canParse(raw) ? new URL(raw) : undefined
  if (
    url === undefined ||
    (url.protocol !== 'redis:' && url.protocol !== 'rediss:') ||
    url.hostname === '' ||
    !/^(\/\d*)?$/.test(url.pathname)
  ) {
    throw new ConfigError(
      'REDIS_URL must be redis://[user:password@]host[:port][/db], or rediss://… for TLS',
    )
  }
  return Object.freeze({ url: raw, prefix })
}

function parseConnectionLimits(env: Env): ConnectionLimits {
  const limits = {
    maxConnections: integer(
      'PETSTORE_MAX_CONNECTIONS',
      read(env, 'PETSTORE_MAX_CONNECTIONS'),
      1,
      1_000_000,
    ),
    headersTimeoutMs: integer(
      'PETSTORE_HEADERS_TIMEOUT_MS',
      read(env, 'PETSTORE_HEADERS_TIMEOUT_MS'),
      100,
      3_600_000,
    ),
    requestTimeoutMs: integer(
      'PETSTORE_REQUEST_TIMEOUT_MS',
      read(env, 'PETSTORE_REQUEST_TIMEOUT_MS'),
      100,
      3_600_000,
    ),
  }
  // The headers are part of the request, so their deadline cannot be the later one.
  if (limits.headersTimeoutMs > limits.requestTimeoutMs) {
    throw new ConfigError(
      `PETSTORE_HEADERS_TIMEOUT_MS (${limits.headersTimeoutMs}) must not exceed PETSTORE_REQUEST_TIMEOUT_MS (${limits.requestTimeoutMs})`,
    )
  }
  return Object.freeze(limits)
}

/** `<NAME>_PORT` (`off`: undefined) and `<NAME>_HOST` (default: `defaultHost`) of a side listener. */
function sideListener(
  env: Env,
  name: 'METRICS' | 'PROBE',
  defaultHost: string,
): SideListener | undefined {
  const rawHost = env[`${name}_HOST`]?.trim()
  // Checked even when off: a bad value stops the start before it is ever used.
  const sideHost =
    rawHost === undefined || rawHost === '' ? defaultHost : host(rawHost, `${name}_HOST`)
  const raw = read(env, `${name}_PORT`)
  if (raw.toLowerCase() === 'off') return undefined
  if (!/^\d+$/.test(raw) || Number(raw) > 65535) {
    // Kubernetes sets <NAME>_PORT=tcp://… in pods for a Service named like the variable.
    const hint = raw.startsWith('tcp://')
      ? ` (Kubernetes sets this for a Service named ${name.toLowerCase()}: set ${name}_PORT, or enableServiceLinks: false)`
      : ''
    throw new ConfigError(
      `${name}_PORT must be an integer from 0 to 65535, or off (got "${raw}")${hint}`,
    )
  }
  return Object.freeze({ port: Number(raw), host: sideHost })
}

const METRICS_DEFAULT_HOST = '127.0.0.1'

/**
 * D17: METRICS_PORT (`off` disables) and METRICS_HOST (default: loopback, whatever HOST is). A
 * port and an address of its own, so that metrics, which need no key, are never public by
 * accident with the API (HOST=0.0.0.0 in a container); hence never the API's port either.
 */
function parseMetrics(env: Env, api: { port: number; host: string }): SideListener | undefined {
  const metrics = sideListener(env, 'METRICS', METRICS_DEFAULT_HOST)
  if (metrics !== undefined && metrics.port !== 0 && metrics.port === api.port) {
    throw new ConfigError(
      `METRICS_PORT must differ from PORT (both ${metrics.port}): metrics are never served on the API's port`,
    )
  }
  return metrics
}

/**
 * D20: PROBE_PORT (`off`, the default, disables) and PROBE_HOST (default: HOST): /healthz and
 * /readyz on a listener of their own, which a flood of connections on the API's port does not
 * hold up. Never the API's port nor the metrics port.
 */
function parseProbes(
  env: Env,
  api: { port: number; host: string },
  metrics: SideListener | undefined,
): SideListener | undefined {
  const probes = sideListener(env, 'PROBE', api.host)
  if (probes === undefined || probes.port === 0) return probes
  if (probes.port === api.port) {
    throw new ConfigError(
      `PROBE_PORT must differ from PORT (both ${probes.port}): probes there would wait behind the API's connections`,
    )
  }
  if (probes.port === metrics?.port) {
    throw new ConfigError(`PROBE_PORT must differ from METRICS_PORT (both ${probes.port})`)
  }
  return probes
}

function sideListeners(
  env: Env,
  api: { port: number; host: string },
): Pick<Config, 'metrics' | 'probes'> {
  const metrics = parseMetrics(env, api)
  return { metrics, probes: parseProbes(env, api, metrics) }
}

/** The OTLP/HTTP path of traces, added to OTEL_EXPORTER_OTLP_ENDPOINT (not to the traces one). */
const OTLP_TRACES_PATH = 'v1/traces'

function otlpUrl(name: string, raw: string): URL {
  const url = URL.canParse(raw) ? new URL(raw) : undefined
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    // Never the value itself: a collector's credentials go in it (user, password, query).
    const got = url === undefined ? 'not a URL' : `a URL of scheme ${url.protocol}`
    throw new ConfigError(
      `${name} must be an http:// or https:// URL of an OTLP/HTTP receiver (got ${got})`,
    )
  }
  return url
}

/**
 * The endpoint as the OTLP exporter specification builds it: the traces variable as given, or
 * the general one with `v1/traces` appended to its path. Undefined when neither is set.
 */
export function tracesEndpoint(env: Env): string | undefined {
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim()
  if (traces) return otlpUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', traces).href
  const general = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim()
  if (!general) return undefined
  const url = otlpUrl('OTEL_EXPORTER_OTLP_ENDPOINT', general)
  let path = url.pathname
  while (path.endsWith('/')) path = path.slice(0, -1)
  url.pathname = `${path}/${OTLP_TRACES_PATH}`
  return url.href
}

/** D23: on when an OTLP endpoint is set and OTEL_SDK_DISABLED is not `true`. */
export function tracingWanted(env: Env): boolean {
  const disabled = env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true'
  return (
    !disabled &&
    Boolean(
      env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim(),
    )
  )
}

function parseTracing(env: Env): TracingConfig | undefined {
  const protocolName = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim()
    ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
    : 'OTEL_EXPORTER_OTLP_PROTOCOL'
  const rawProtocol =
    env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() || read(env, 'OTEL_EXPORTER_OTLP_PROTOCOL')
  if (rawProtocol === 'grpc') {
    throw new ConfigError(
      `${protocolName}=grpc is not supported: use http/protobuf or http/json (an OpenTelemetry Collector takes both on port 4318)`,
    )
  }
  const protocol = oneOf(protocolName, rawProtocol, TRACES_PROTOCOLS)
  const sampler = oneOf('OTEL_TRACES_SAMPLER', read(env, 'OTEL_TRACES_SAMPLER'), TRACES_SAMPLERS)
  const rawRatio = read(env, 'OTEL_TRACES_SAMPLER_ARG')
  const samplerRatio = Number(rawRatio)
  if (!/^(0|1|0?\.\d+|1\.0*)$/.test(rawRatio) || samplerRatio > 1) {
    throw new ConfigError(
      `OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, such as 0.1 (got "${rawRatio}")`,
    )
  }
  const disabled = env.OTEL_SDK_DISABLED?.trim().toLowerCase()
  if (disabled !== undefined && disabled !== '' && disabled !== 'true' && disabled !== 'false') {
    throw new ConfigError(
      `OTEL_SDK_DISABLED must be true or false (got "${env.OTEL_SDK_DISABLED}")`,
    )
  }
  const scheduleDelayMs = integer(
    'OTEL_BSP_SCHEDULE_DELAY',
    read(env, 'OTEL_BSP_SCHEDULE_DELAY'),
    0,
    60_000,
  )
  const endpoint = tracesEndpoint(env)
  if (endpoint === undefined || !tracingWanted(env)) return undefined
  return Object.freeze({ endpoint, protocol, sampler, samplerRatio, scheduleDelayMs })
}

export function loadConfig(env: Env = process.env): Readonly<Config> {
  const deployment = oneOf('PETSTORE_ENV', read(env, 'PETSTORE_ENV'), ['production', 'staging'])
  const api = { port: integer('PORT', read(env, 'PORT'), 0, 65535), host: host(read(env, 'HOST')) }
  return Object.freeze({
    ...api,
    database: parseDatabase(env),
    migrate: oneOf('PETSTORE_MIGRATE', read(env, 'PETSTORE_MIGRATE'), MIGRATE_MODES),
    env: deployment,
    apiKeys: Object.freeze(parseApiKeys(env, deployment)),
    rateLimit: integer('PETSTORE_RATE_LIMIT', read(env, 'PETSTORE_RATE_LIMIT'), 0, 1_000_000),
    authFailureLimit: integer(
      'PETSTORE_AUTH_FAILURE_LIMIT',
      read(env, 'PETSTORE_AUTH_FAILURE_LIMIT'),
      0,
      1_000_000,
    ),
    keyCacheMs: integer('PETSTORE_KEY_CACHE_MS', read(env, 'PETSTORE_KEY_CACHE_MS'), 0, 300_000),
    logLevel: oneOf('LOG_LEVEL', read(env, 'LOG_LEVEL'), LOG_LEVELS),
    corsOrigins: Object.freeze(parseOrigins(env)),
    trustedProxies: Object.freeze(parseTrustedProxies(env)),
    redis: parseRedis(env),
    maxEventLoopDelayMs: integer(
      'PETSTORE_MAX_EVENT_LOOP_DELAY_MS',
      read(env, 'PETSTORE_MAX_EVENT_LOOP_DELAY_MS'),
      0,
      60_000,
    ),
    connections: parseConnectionLimits(env),
    idempotencyTtlSeconds: integer(
      'PETSTORE_IDEMPOTENCY_TTL',
      read(env, 'PETSTORE_IDEMPOTENCY_TTL'),
      1,
      IDEMPOTENCY_TTL_MAX_SECONDS,
    ),
    ...sideListeners(env, api),
    livenessStallMs: integer(
      'PETSTORE_LIVENESS_STALL_MS',
      read(env, 'PETSTORE_LIVENESS_STALL_MS'),
      500,
      600_000,
    ),
    tracing: parseTracing(env),
    stagingFaults: parseStagingFaults(env, deployment),
    unknownSettings: Object.freeze(unknownSettings(env, KNOWN_VARIABLES)),
  })
}

/**
 * D29: faults are staging's rehearsal of failures; production refuses the setting outright
 * rather than ignore it, so that a copied staging configuration cannot fail real clients.
 */
function parseStagingFaults(env: Env, deployment: DeploymentEnv): StagingFaults | undefined {
  const raw = read(env, 'PETSTORE_STAGING_FAULTS')
  if (raw !== 'off' && deployment !== 'staging') {
    throw new ConfigError(
      `PETSTORE_STAGING_FAULTS is honoured only with PETSTORE_ENV=staging, and this is ${deployment}: unset it (its failures are for rehearsing clients, never for real ones)`,
    )
  }
  try {
    return parseFaults(raw)
  } catch (err) {
    if (err instanceof FaultsSyntaxError) {
      throw new ConfigError(`PETSTORE_STAGING_FAULTS: ${err.message} (got "${raw}")`)
    }
    throw err
  }
}
