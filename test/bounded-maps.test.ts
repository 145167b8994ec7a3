// No bounded map of ours finds its oldest entry by walking a Map or a Set from its front
// (`map.keys().next()`). V8 leaves a deleted entry's slot in place until the table is rebuilt, and
// iteration passes over every such slot: at the bound, each entry forgotten from the front adds
// one more for the next eviction to pass over, so forgetting the oldest costs in proportion to
// the churn, and a flood of new addresses or tokens makes every request pay for it (issue 53;
// docs/benchmarks.md, "Failed authentications from many addresses", has the figures). A bounded
// map forgets in constant time instead: an LRUCache (keys/key-cache.ts, rate-limit/auth-failures.ts)
// or a ring of its keys (rate-limit/counter.ts).
//
// The cost itself is a matter of time, which no test here asserts (npm run bench -- auth-flood
// measures it); this test keeps the pattern out, and the bound tests beside each map
// (test/http/key-cache.test.ts, test/rate-limit/bounds.test.ts) keep what is forgotten, and when.
import assert from 'node:assert/strict'
import { globSync, readFileSync } from 'node:fs'
import { stripTypeScriptTypes } from 'node:module'
import { test } from 'node:test'
import { type Node, parse } from 'acorn'
import { full } from 'acorn-walk'

/**
 * Where the first of an iteration is taken on purpose, and why the walk stays short whatever
 * clients do.
 */
const ALLOWED: Record<string, string> = {
  // A set made for one request from its own header lines, never deleted from.
  'src/http/routes/idempotency.ts': 'one request’s distinct Idempotency-Key values',
  // One address's sockets, at most the probe port's per-address cap (a constant of the code):
  // the slots it can have left behind are as few.
  'src/observability/connection-cap.ts': 'one address’s connections, bounded by the code',
}

type Call = Node & { callee: Node & { property?: Node & { name?: string }; object?: Call } }

/** `<x>.keys().next()`, `.values().next()`, `.entries().next()`: the first of an iteration. */
function takesFirst(node: Node): boolean {
  if (node.type !== 'CallExpression') return false
  const { callee } = node as Call
  const inner = callee.object
  return (
    callee.type === 'MemberExpression' &&
    callee.property?.name === 'next' &&
    inner?.type === 'CallExpression' &&
    inner.callee.type === 'MemberExpression' &&
    ['keys', 'values', 'entries'].includes(inner.callee.property?.name ?? '')
  )
}

test('no map in src/ finds its oldest entry by walking from its front', () => {
  const found: string[] = []
  for (const file of globSync('src/**/*.ts').sort()) {
    if (ALLOWED[file] !== undefined) continue
    const code = stripTypeScriptTypes(readFileSync(file, 'utf8'), { mode: 'strip' })
    const program = parse(code, { ecmaVersion: 'latest', sourceType: 'module', locations: true })
    full(program, (node) => {
      if (takesFirst(node)) found.push(`${file}:${node.loc?.start.line}`)
    })
  }
  assert.deepEqual(found, [], 'an LRUCache (lru-cache) or a ring forgets the oldest in O(1)')
})

test('each place allowed to take the first of an iteration still does', () => {
  // An allowance outlives its reason silently otherwise.
  for (const file of Object.keys(ALLOWED)) {
    const code = stripTypeScriptTypes(readFileSync(file, 'utf8'), { mode: 'strip' })
    let takes = false
    full(parse(code, { ecmaVersion: 'latest', sourceType: 'module' }), (node) => {
      takes ||= takesFirst(node)
    })
    assert.ok(takes, `${file} no longer needs its allowance`)
  }
})
