// npm test's last line (test/summary.ts): the counts read from each run's spec summary, and
// their totals, with the runs that failed without their counts saying so named.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { type Counts, formatDuration, parseCounts, type RunReport, totalLine } from './summary.ts'

const SUMMARY = (pass: number, fail: number, skipped = 0) =>
  [
    `ℹ tests ${pass + fail + skipped}`,
    'ℹ suites 3',
    `ℹ pass ${pass}`,
    `ℹ fail ${fail}`,
    'ℹ cancelled 0',
    `ℹ skipped ${skipped}`,
    'ℹ todo 0',
    'ℹ duration_ms 1234.5678',
  ].join('\n')

const counts = (passed: number, failed = 0, skipped = 0): Counts => ({
  passed,
  failed,
  cancelled: 0,
  skipped,
  todo: 0,
})

describe('npm test: the totals line', () => {
  test('the counts are read from the summary block, the last one where a test printed its like', () => {
    const output = [
      '▶ petstore CLI',
      '  ✔ migrate applies the schema once (12ms)',
      // A test's own output, shown before the summary, that looks like one.
      'ℹ tests 99',
      'ℹ pass 99',
      'ℹ fail 0',
      '✔ petstore CLI (900ms)',
      SUMMARY(40, 2, 1),
      '',
      '✖ failing tests:',
      '',
      'test at test/cli.test.ts:30:3',
      '✖ migrate applies the schema once (12ms)',
      '  ℹ pass 5',
    ].join('\n')
    assert.deepEqual(parseCounts(output), counts(40, 2, 1))
  })

  test('colours and CRLF line ends are read through; every count is kept', () => {
    const output = [
      '\u001b[34mℹ tests 10\u001b[39m',
      '\u001b[34mℹ pass 5\u001b[39m',
      '\u001b[34mℹ fail 1\u001b[39m',
      '\u001b[34mℹ cancelled 1\u001b[39m',
      '\u001b[34mℹ skipped 2\u001b[39m',
      '\u001b[34mℹ todo 1\u001b[39m',
    ].join('\r\n')
    assert.deepEqual(parseCounts(output), {
      passed: 5,
      failed: 1,
      cancelled: 1,
      skipped: 2,
      todo: 1,
    })
  })

  test('no summary, or one cut short before pass and fail: no counts', () => {
    assert.equal(parseCounts(''), undefined)
    assert.equal(parseCounts('▶ petstore CLI\nFATAL ERROR: Reached heap limit\n'), undefined)
    assert.equal(parseCounts('ℹ tests 3\nℹ suites 1\n'), undefined)
  })

  test('the totals over every run, with thousands separated, cancelled and todo only when any', () => {
    const reports: RunReport[] = [
      { name: 'SQLite shared process', code: 0, counts: counts(1200, 0, 2) },
      { name: 'SQLite isolated files', code: 0, counts: counts(150, 0, 1) },
      { name: 'PostgreSQL shared process', code: 0, counts: counts(62) },
    ]
    assert.equal(
      totalLine(reports, 131_400),
      'npm test: 1,412 passed, 0 failed, 3 skipped (3 runs, 2 min 11 s)',
    )
    const withMore: RunReport = {
      name: 'PgBouncer isolated files',
      code: 1,
      counts: { passed: 1, failed: 2, cancelled: 1, skipped: 0, todo: 3 },
    }
    assert.equal(
      totalLine([...reports, withMore], 48_000),
      'npm test: 1,413 passed, 2 failed, 1 cancelled, 3 skipped, 3 todo (4 runs, 48 s)',
    )
  })

  test('a run that crashed before its counts, or failed with none failed, is named as failed', () => {
    const reports: RunReport[] = [
      { name: 'SQLite shared process', code: 0, counts: counts(10) },
      { name: 'PostgreSQL isolated files', code: 1, counts: undefined },
      { name: 'PgBouncer shared process', code: null, signal: 'SIGKILL', counts: undefined },
      { name: 'SQLite isolated files', code: 1, counts: counts(3) },
    ]
    assert.equal(
      totalLine(reports, 5_000, ['no PgBouncer run (PETSTORE_REQUIRE_PGBOUNCER=1)']),
      'npm test: 13 passed, 0 failed, 0 skipped; 3 runs failed: PostgreSQL isolated files (no counts, exit code 1), PgBouncer shared process (no counts, killed by SIGKILL), SQLite isolated files (exit code 1, no test failed); no PgBouncer run (PETSTORE_REQUIRE_PGBOUNCER=1) (4 runs, 5 s)',
    )
  })

  test('durations: seconds under a minute, else minutes and seconds', () => {
    assert.equal(formatDuration(0), '0 s')
    assert.equal(formatDuration(59_400), '59 s')
    assert.equal(formatDuration(59_600), '1 min 0 s')
    assert.equal(formatDuration(131_000), '2 min 11 s')
  })
})
