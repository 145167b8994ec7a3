// Writes the alerts and the dashboard (D31) from scripts/monitoring/: the rule file and the
// dashboard under deploy/monitoring/, and the Kubernetes component's PrometheusRule and dashboard
// ConfigMap. Never edit those by hand: change scripts/monitoring/settings.ts (objectives,
// thresholds, the job) and run this; test/monitoring.test.ts fails on drift.
//
//   npm run monitoring
//   npm run monitoring -- --time-scale 60 --out /tmp/rehearsal
//
// With --time-scale N it writes only the rule file, every window and `for` N times shorter, to
// the folder given: the same rules, to rehearse the alerts on a test or staging Prometheus in
// minutes rather than hours (docs/operations.md, Alerts).
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { monitoringFiles, ROOT, rulesYaml } from './monitoring/files.ts'
import { buildRules } from './monitoring/rules.ts'

const { values } = parseArgs({
  options: { 'time-scale': { type: 'string' }, out: { type: 'string' } },
})

if (values['time-scale'] !== undefined) {
  const timeScale = Number(values['time-scale'])
  if (!(timeScale >= 1) || values.out === undefined) {
    throw new Error('--time-scale takes a number of 1 or more, and --out a folder')
  }
  mkdirSync(values.out, { recursive: true })
  const target = join(values.out, 'petstore.rules.yaml')
  writeFileSync(target, rulesYaml(buildRules({ timeScale })))
  process.stdout.write(`wrote ${target} (windows and for ${timeScale} times shorter)\n`)
} else {
  for (const [path, text] of monitoringFiles()) {
    writeFileSync(join(ROOT, path), text)
    process.stdout.write(`wrote ${path}\n`)
  }
}
