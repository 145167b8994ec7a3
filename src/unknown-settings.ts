// D9: a setting the service does not know is ignored, so a misspelt one (PETSTORE_STAGING_FAULT
// for PETSTORE_STAGING_FAULTS) would change nothing in silence. A start names every variable of
// the service's namespaces (PETSTORE_, DATABASE_, OTEL_) that it does not read, with the nearest
// name it does read, and a few names other tools use for the same thing (DB_URL).

/** The namespaces whose every variable is the service's, or a mistake for one of its own. */
const NAMESPACES = ['PETSTORE_', 'DATABASE_', 'OTEL_'] as const

/**
 * Variables read outside config.ts: by `petstore pets` (the client's address and key), by the
 * OpenTelemetry parts tracing loads (the exporter and resource detector read their own, D23), and
 * by this repository's test suite, whose variables reach the services it starts.
 */
const READ_ELSEWHERE = [
  'PETSTORE_URL',
  'PETSTORE_API_KEY',
  'OTEL_EXPORTER_OTLP_HEADERS',
  'OTEL_EXPORTER_OTLP_TRACES_HEADERS',
  'OTEL_EXPORTER_OTLP_TIMEOUT',
  'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT',
  'OTEL_EXPORTER_OTLP_COMPRESSION',
  'OTEL_EXPORTER_OTLP_TRACES_COMPRESSION',
  'OTEL_RESOURCE_ATTRIBUTES',
  'OTEL_SEMCONV_STABILITY_OPT_IN',
  'OTEL_FASTIFY_IGNORE_PATHS',
  'PETSTORE_PG_BIN',
  'PETSTORE_PGBOUNCER',
  'PETSTORE_HAPROXY',
]
/** The test suite's switches and targets (CONTRIBUTING.md): PETSTORE_TEST_…, PETSTORE_REQUIRE_…. */
const TEST_PREFIXES = ['PETSTORE_TEST_', 'PETSTORE_REQUIRE_']

/** Names other software uses for one of ours, outside our namespaces. */
const ALIASES: Readonly<Record<string, string>> = {
  DB_URL: 'DATABASE_URL',
  DB_PATH: 'DATABASE_URL',
  POSTGRES_URL: 'DATABASE_URL',
  SQLITE_PATH: 'DATABASE_URL',
  LOGLEVEL: 'LOG_LEVEL',
}

export interface UnknownSetting {
  /** The variable as set (its value is never kept: it may be a secret). */
  name: string
  /** The known variable it most likely meant; undefined when none is near. */
  suggestion: string | undefined
}

/** The known variables: those config.ts reads (given), and READ_ELSEWHERE. */
export function knownVariables(readByConfig: Iterable<string>): Set<string> {
  return new Set([...readByConfig, ...READ_ELSEWHERE])
}

/** Every variable of `env`, in name order, that is ours by its name but not one we read. */
export function unknownSettings(
  env: Record<string, string | undefined>,
  known: ReadonlySet<string>,
): UnknownSetting[] {
  const unknown: UnknownSetting[] = []
  for (const name of Object.keys(env).sort()) {
    if (known.has(name) || env[name] === undefined) continue
    const alias = ALIASES[name]
    if (alias !== undefined) unknown.push({ name, suggestion: alias })
    else if (isOurs(name)) unknown.push({ name, suggestion: nearest(name, known) })
  }
  return unknown
}

function isOurs(name: string): boolean {
  if (TEST_PREFIXES.some((prefix) => name.startsWith(prefix))) return false
  return NAMESPACES.some((prefix) => name.startsWith(prefix))
}

/** The line a start logs for it. */
export function unknownSettingMessage({ name, suggestion }: UnknownSetting): string {
  const hint = suggestion === undefined ? '' : `; did you mean ${suggestion}?`
  return `${name} is set but is not a variable petstore reads, so it changes nothing${hint} (every variable: docs/configuration.md)`
}

/**
 * The known name nearest to `name`, compared without the PETSTORE_ prefix too (PETSTORE_PROBE_PORT
 * means PROBE_PORT), when it is near enough to be a slip: a few edits, under a third of the name.
 */
function nearest(name: string, known: ReadonlySet<string>): string | undefined {
  let best: { name: string; distance: number } | undefined
  for (const candidate of [...known].sort()) {
    const distance = Math.min(
      editDistance(name, candidate),
      editDistance(bare(name), bare(candidate)),
    )
    if (best === undefined || distance < best.distance) best = { name: candidate, distance }
  }
  if (best === undefined) return undefined
  return best.distance <= Math.min(3, Math.floor(bare(name).length / 3)) ? best.name : undefined
}

function bare(name: string): string {
  return name.startsWith('PETSTORE_') ? name.slice('PETSTORE_'.length) : name
}

/** Optimal string alignment distance: insertions, deletions, substitutions, adjacent swaps. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = []
  for (let i = 0; i <= a.length; i++) {
    const row: number[] = [i]
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j)
        continue
      }
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let value = Math.min(
        (rows[i - 1]?.[j] ?? 0) + 1,
        (row[j - 1] ?? 0) + 1,
        (rows[i - 1]?.[j - 1] ?? 0) + cost,
      )
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        value = Math.min(value, (rows[i - 2]?.[j - 2] ?? 0) + 1)
      }
      row.push(value)
    }
    rows.push(row)
  }
  return rows[a.length]?.[b.length] ?? 0
}
