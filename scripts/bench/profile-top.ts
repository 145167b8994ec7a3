// Prints the top self-time frames of a V8 .cpuprofile (from `npm run bench -- --profile`, which
// runs the service with --cpu-prof), and the total time under a few frames of interest.
//
//   node scripts/bench/profile-top.ts .bench/profiles/CPU.….cpuprofile [count]
import { readFileSync } from 'node:fs'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  hitCount?: number
  children?: number[]
}

const [file, countArg] = process.argv.slice(2)
if (!file) {
  process.stderr.write('usage: node scripts/bench/profile-top.ts <file.cpuprofile> [count]\n')
  process.exit(2)
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

const byId = new Map(profile.nodes.map((n) => [n.id, n]))
const selfUs = new Map<number, number>()
profile.samples.forEach((id, i) => {
  selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
})
// Shares are of the busy time: the profile also samples the idle periods while the references run.
const idleIds = new Set(
  profile.nodes.filter((n) => n.callFrame.functionName === '(idle)').map((n) => n.id),
)
const total = [...selfUs].reduce((sum, [id, us]) => (idleIds.has(id) ? sum : sum + us), 0)

const where = (n: ProfileNode) => {
  const url = n.callFrame.url.replace(/^.*\/(node_modules\/|src\/)/, '$1')
  return `${n.callFrame.functionName || '(anonymous)'} ${url}:${n.callFrame.lineNumber + 1}`
}

// Self time, grouped by function (a function appears at many places in the tree).
const self = new Map<string, number>()
for (const [id, us] of selfUs) {
  if (idleIds.has(id)) continue
  const node = byId.get(id)
  if (node) self.set(where(node), (self.get(where(node)) ?? 0) + us)
}
const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(countArg ?? 40))
process.stdout.write(`${(total / 1000).toFixed(0)} ms busy\n\nself time (share of busy time):\n`)
for (const [name, us] of top) {
  process.stdout.write(`${((100 * us) / total).toFixed(1).padStart(5)}%  ${name}\n`)
}

// Total (inclusive) time per function: self time of the node and everything below it, counted
// once per stack even when the function recurses.
const inclusive = new Map<string, number>()
const walk = (id: number, onStack: Set<string>): number => {
  const node = byId.get(id)
  if (!node) return 0
  let us = idleIds.has(id) ? 0 : (selfUs.get(id) ?? 0)
  const name = where(node)
  const fresh = !onStack.has(name)
  if (fresh) onStack.add(name)
  for (const child of node.children ?? []) us += walk(child, onStack)
  if (fresh) {
    onStack.delete(name)
    inclusive.set(name, (inclusive.get(name) ?? 0) + us)
  }
  return us
}
const root = profile.nodes[0]
if (root) walk(root.id, new Set())
process.stdout.write('\ntotal time (inclusive), top frames:\n')
for (const [name, us] of [...inclusive]
  .sort((a, b) => b[1] - a[1])
  .slice(0, Number(countArg ?? 40))) {
  process.stdout.write(`${((100 * us) / total).toFixed(1).padStart(5)}%  ${name}\n`)
}
