// The metric names a PromQL expression reads, for the test that each is one the service exports
// (test/monitoring-prometheus.test.ts). No PromQL parser is installed; this reads what the rules
// and the dashboard write: strings, label matchers, ranges and the label lists of `by`, `on` and
// their kin are set aside, then every identifier that is neither a function (followed by `(`)
// nor a keyword is a metric name.
const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan'])

export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
  const names = new Set<string>()
  for (const match of bare.matchAll(/(?<![\w.$])[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const name = match[0]
    const rest = bare.slice(match.index + name.length).trimStart()
    if (rest.startsWith('(') || KEYWORDS.has(name.toLowerCase())) continue
    names.add(name)
  }
  return [...names].sort()
}
