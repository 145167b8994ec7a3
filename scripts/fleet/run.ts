// npm run fleet: a real fleet on this machine, on the Patroni reference topology (D30), under the
// load of our own SDK's users, through the faults operators live through, one after another:
//
// - the instances' and what they depend on: a rolling restart, an instance's primary process
//   killed, Redis stopped, PgBouncer killed and started again;
// - the database's, done as they happen for real, and answered by Patroni alone: a planned
//   `patronictl switchover`, the leader's postmaster killed, the leader's machine lost (its
//   Patroni and PostgreSQL killed together) and later back, one etcd member stopped, etcd's
//   quorum lost, PgBouncer restarted during a switchover;
// - 2,000 extra connections through the balancer, then straight at one instance, while every
//   instance's /healthz is probed on fresh connections.
//
// Then what the database holds is checked against what every caller was told, counted per fault
// as Jepsen counts (counts.ts), and docs/fleet-report.md is written with the figures and
// Patroni's own timeline of each database fault.
//
//   npm run fleet                the full run; writes docs/fleet-report.md (about 5 minutes)
//   npm run fleet -- --quick     shorter faults and floods; writes nothing (npm run test:patroni
//                                runs this form and asserts what must hold)
import { writeFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { runFleet } from './harness.ts'
import { renderFleet } from './report.ts'

const { values: flags } = parseArgs({ options: { quick: { type: 'boolean', default: false } } })

const report = await runFleet({ quick: flags.quick, log: (line) => console.log(line) })
const { markdown, held } = renderFleet(report)
console.log(markdown)
if (!flags.quick) writeFileSync(new URL('../../docs/fleet-report.md', import.meta.url), markdown)
process.exitCode = held ? 0 : 1
