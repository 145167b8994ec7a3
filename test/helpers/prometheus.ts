// A strict reader of the Prometheus text exposition format (version 0.0.4), for tests: no
// parser of it is installed (prom-client only writes it). It refuses what Prometheus and
// `promtool check metrics` refuse: a malformed line, name, label or value; a TYPE after the
// family's samples or twice; a family's samples split apart; a series given twice; a histogram
// without its +Inf bucket, with buckets that decrease, or whose +Inf bucket differs from _count.
// https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped'

export interface Sample {
  /** The sample's own name: a histogram's are `<family>_bucket`, `_sum`, `_count`. */
  name: string
  labels: Record<string, string>
  value: number
}

export interface Family {
  name: string
  type: MetricType
  help: string | undefined
  samples: Sample[]
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/
const TYPES = new Set<MetricType>(['counter', 'gauge', 'histogram', 'summary', 'untyped'])
const SUFFIXES: Partial<Record<MetricType, readonly string[]>> = {
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['_sum', '_count'],
  counter: ['_total'],
}

function fail(lineNo: number, line: string, why: string): never {
  throw new Error(`exposition line ${lineNo}: ${why}: ${JSON.stringify(line)}`)
}

/**
 * A value as Prometheus reads it (Go's strconv.ParseFloat): special values in any case, so
 * prom-client's `Nan` for an empty event-loop sample is valid, as Prometheus takes it.
 */
function parseValue(raw: string): number | undefined {
  if (/^[+-]?nan$/i.test(raw)) return Number.NaN
  if (/^\+?inf(inity)?$/i.test(raw)) return Number.POSITIVE_INFINITY
  if (/^-inf(inity)?$/i.test(raw)) return Number.NEGATIVE_INFINITY
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(raw)) return undefined
  return Number(raw)
}

/** Labels from just after `{` ; returns them and the index just after `}`. */
function parseLabels(
  line: string,
  start: number,
  lineNo: number,
): [Record<string, string>, number] {
  const labels: Record<string, string> = {}
  let i = start
  for (;;) {
    if (line[i] === '}') return [labels, i + 1]
    const eq = line.indexOf('=', i)
    if (eq === -1) fail(lineNo, line, 'label without "="')
    const name = line.slice(i, eq).trim()
    if (!LABEL_NAME.test(name)) fail(lineNo, line, `bad label name ${JSON.stringify(name)}`)
    if (name in labels) fail(lineNo, line, `label ${name} given twice`)
    if (line[eq + 1] !== '"') fail(lineNo, line, 'label value not quoted')
    let value = ''
    let j = eq + 2
    for (;;) {
      const c = line[j]
      if (c === undefined) fail(lineNo, line, 'unterminated label value')
      if (c === '"') break
      if (c === '\\') {
        const next = line[j + 1]
        if (next === 'n') value += '\n'
        else if (next === '\\' || next === '"') value += next
        else fail(lineNo, line, 'bad escape in label value')
        j += 2
        continue
      }
      value += c
      j += 1
    }
    labels[name] = value
    i = j + 1
    if (line[i] === ',') i += 1
    else if (line[i] !== '}') fail(lineNo, line, 'expected "," or "}" after a label')
  }
}

/** The family a sample belongs to: its own name, or that name less a suffix of its type. */
function familyOf(name: string, families: Map<string, Family>): Family | undefined {
  const exact = families.get(name)
  if (exact !== undefined && exact.type !== 'histogram' && exact.type !== 'summary') return exact
  for (const [familyName, family] of families) {
    for (const suffix of SUFFIXES[family.type] ?? []) {
      if (name === familyName + suffix) return family
    }
  }
  return exact
}

export function parseExposition(text: string): Map<string, Family> {
  if (text !== '' && !text.endsWith('\n')) throw new Error('the exposition must end with a newline')
  const families = new Map<string, Family>()
  const seenSeries = new Set<string>()
  const closed = new Set<string>()
  let current: Family | undefined
  const lines = text.split('\n').slice(0, -1)
  lines.forEach((line, index) => {
    const lineNo = index + 1
    if (line.trim() === '') return
    if (line.startsWith('#')) {
      const match = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s(.*))?$/.exec(line)
      if (match === null) return // any other comment
      const [, keyword, name = '', rest = ''] = match
      if (!METRIC_NAME.test(name)) fail(lineNo, line, 'bad metric name')
      let family = families.get(name)
      if (family === undefined) {
        family = { name, type: 'untyped', help: undefined, samples: [] }
        families.set(name, family)
      } else if (family.samples.length > 0 || closed.has(name)) {
        fail(lineNo, line, `${keyword} after the samples of ${name}`)
      }
      if (keyword === 'HELP') {
        if (family.help !== undefined) fail(lineNo, line, `HELP given twice for ${name}`)
        family.help = rest
      } else {
        const type = rest.trim() as MetricType
        if (!TYPES.has(type)) fail(lineNo, line, 'unknown TYPE')
        if (family.type !== 'untyped') fail(lineNo, line, `TYPE given twice for ${name}`)
        family.type = type
      }
      if (current !== undefined && current !== family) closed.add(current.name)
      current = family
      return
    }
    const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)
    if (nameMatch === null) fail(lineNo, line, 'bad metric name')
    const name = nameMatch[0]
    let labels: Record<string, string> = {}
    let i = name.length
    if (line[i] === '{') [labels, i] = parseLabels(line, i + 1, lineNo)
    const fields = line.slice(i).trim().split(/\s+/)
    if (line[i] !== ' ' || fields.length < 1 || fields.length > 2) {
      fail(lineNo, line, 'expected one space, a value and an optional timestamp')
    }
    const value = parseValue(fields[0] ?? '')
    if (value === undefined) fail(lineNo, line, 'bad value')
    if (fields[1] !== undefined && !/^-?\d+$/.test(fields[1])) fail(lineNo, line, 'bad timestamp')
    let family = familyOf(name, families)
    if (family === undefined) {
      family = { name, type: 'untyped', help: undefined, samples: [] }
      families.set(name, family)
    }
    if (closed.has(family.name)) fail(lineNo, line, `the samples of ${family.name} are split`)
    if (current !== undefined && current !== family) closed.add(current.name)
    current = family
    const series = `${name}${JSON.stringify(Object.entries(labels).sort())}`
    if (seenSeries.has(series)) fail(lineNo, line, 'series given twice')
    seenSeries.add(series)
    if (name.endsWith('_bucket') && family.type === 'histogram' && labels.le === undefined) {
      fail(lineNo, line, 'histogram bucket without le')
    }
    family.samples.push({ name, labels, value })
  })
  for (const family of families.values()) {
    if (family.type === 'histogram') checkHistogram(family)
  }
  return families
}

function checkHistogram(family: Family): void {
  const groups = new Map<string, { buckets: [number, number][]; count?: number }>()
  for (const sample of family.samples) {
    const { le, ...rest } = sample.labels
    const key = JSON.stringify(Object.entries(rest).sort())
    const group = groups.get(key) ?? { buckets: [] }
    groups.set(key, group)
    if (sample.name === `${family.name}_bucket`) {
      const bound = parseValue(le ?? '')
      if (bound === undefined) throw new Error(`${family.name}: bad le ${JSON.stringify(le)}`)
      group.buckets.push([bound, sample.value])
    } else if (sample.name === `${family.name}_count`) {
      group.count = sample.value
    }
  }
  for (const [key, { buckets, count }] of groups) {
    const sorted = [...buckets].sort((a, b) => a[0] - b[0])
    const last = sorted.at(-1)
    if (last === undefined || last[0] !== Number.POSITIVE_INFINITY) {
      throw new Error(`${family.name}${key}: no +Inf bucket`)
    }
    sorted.forEach(([, n], i) => {
      if (i > 0 && n < (sorted[i - 1]?.[1] ?? 0)) {
        throw new Error(`${family.name}${key}: bucket counts decrease`)
      }
    })
    if (count !== last[1]) throw new Error(`${family.name}${key}: _count differs from +Inf`)
  }
}

/** The value of the one sample named `name` whose labels include `labels`; 0 when none. */
export function sampleValue(
  families: Map<string, Family>,
  name: string,
  labels: Record<string, string> = {},
): number {
  const matches = [...families.values()]
    .flatMap((family) => family.samples)
    .filter(
      (sample) =>
        sample.name === name &&
        Object.entries(labels).every(([label, value]) => sample.labels[label] === value),
    )
  if (matches.length > 1) throw new Error(`${name} ${JSON.stringify(labels)}: several series`)
  return matches[0]?.value ?? 0
}
