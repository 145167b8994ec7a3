// npm test's last line (test/run.ts): the totals over its `node --test` runs, read from the
// summary block the spec reporter ends each run's report with (`ℹ tests 12`, `ℹ pass 11`, …).

/** What one run counted. */
export interface Counts {
  passed: number
  failed: number
  cancelled: number
  skipped: number
  todo: number
}

/** One `node --test` run: its name, how it ended, and its counts when it printed them. */
export interface RunReport {
  name: string
  /** The exit code; null when a signal ended it. */
  code: number | null
  signal?: string | null
  counts: Counts | undefined
}

const SUMMARY_LINE =
  /^ℹ (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) (\d+(?:\.\d+)?)$/
// Colours, where a reporter used them.
// biome-ignore lint/suspicious/noControlCharactersInRegex: the escape character is the point
const COLOUR = /\u001b\[[0-9;]*m/g

/**
 * The counts of the spec reporter's summary in `output` (a run's stdout), or undefined when it
 * has none: the run ended before it could report. The last block counts: a test's own output,
 * shown before it, may look like one.
 */
export function parseCounts(output: string): Counts | undefined {
  const lines = output.replaceAll(COLOUR, '').split(/\r?\n/)
  const start = lines.findLastIndex((line) => /^ℹ tests \d+$/.test(line))
  if (start === -1) return undefined
  const found = new Map<string, number>()
  for (const line of lines.slice(start)) {
    const match = SUMMARY_LINE.exec(line)
    if (match === null) break
    found.set(match[1] as string, Number(match[2]))
  }
  const passed = found.get('pass')
  const failed = found.get('fail')
  if (passed === undefined || failed === undefined) return undefined
  return {
    passed,
    failed,
    cancelled: found.get('cancelled') ?? 0,
    skipped: found.get('skipped') ?? 0,
    todo: found.get('todo') ?? 0,
  }
}

/**
 * Why a run failed where its counts do not say so: it printed none (it crashed, or was killed),
 * or it exited non-zero with no failed or cancelled test. Undefined for a run its counts explain.
 */
function unexplained({ code, signal, counts }: RunReport): string | undefined {
  const ended = signal ? `killed by ${signal}` : `exit code ${code}`
  if (counts === undefined) return `no counts, ${ended}`
  if (code !== 0 && counts.failed + counts.cancelled === 0) return `${ended}, no test failed`
  return undefined
}

const number = new Intl.NumberFormat('en-US')

/** `2 min 11 s`, `48 s`. */
export function formatDuration(ms: number): string {
  const seconds = Math.round(ms / 1000)
  const minutes = Math.floor(seconds / 60)
  return minutes === 0 ? `${seconds} s` : `${minutes} min ${seconds % 60} s`
}

/**
 * The one line npm test ends with: the totals first, then each run that failed without its
 * counts saying so (counted as failed, by name), and `problems` (a required database missing).
 * `npm test: 1,412 passed, 0 failed, 3 skipped (6 runs, 2 min 11 s)`
 */
export function totalLine(
  reports: RunReport[],
  durationMs: number,
  problems: string[] = [],
): string {
  const total: Counts = { passed: 0, failed: 0, cancelled: 0, skipped: 0, todo: 0 }
  for (const { counts } of reports) {
    if (counts === undefined) continue
    for (const key of Object.keys(total) as (keyof Counts)[]) total[key] += counts[key]
  }
  const failedRuns = reports.flatMap((report) => {
    const why = unexplained(report)
    return why === undefined ? [] : [`${report.name} (${why})`]
  })
  const parts = [
    `${number.format(total.passed)} passed`,
    `${number.format(total.failed)} failed`,
    ...(total.cancelled > 0 ? [`${number.format(total.cancelled)} cancelled`] : []),
    `${number.format(total.skipped)} skipped`,
    ...(total.todo > 0 ? [`${number.format(total.todo)} todo`] : []),
  ]
  const failures = [
    ...(failedRuns.length > 0
      ? [
          `${failedRuns.length} ${failedRuns.length === 1 ? 'run' : 'runs'} failed: ${failedRuns.join(', ')}`,
        ]
      : []),
    ...problems,
  ]
  const runs = `${reports.length} ${reports.length === 1 ? 'run' : 'runs'}`
  return `npm test: ${parts.join(', ')}${failures.map((failure) => `; ${failure}`).join('')} (${runs}, ${formatDuration(durationMs)})`
}
