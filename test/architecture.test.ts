// The layout is part of the design (README "Design"): data flows config → store → app → server,
// and each module holds one concern. These checks keep it so: no import cycle anywhere in src/,
// the lower layers never reach up, and the client never imports the server's code (D18).
import assert from 'node:assert/strict'
import { globSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import { test } from 'node:test'
import { ISOLATED } from './groups.ts'

/** Relative imports of a module, static (`from '…'`) and dynamic (`import('…')`). */
function relativeImports(file: string): string[] {
  const source = readFileSync(file, 'utf8')
  const found = [...source.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)]
  return found.map(([, target]) => normalize(join(dirname(file), target as string)))
}

function importGraph(pattern: string): Map<string, string[]> {
  const files = globSync(pattern).map((file) => normalize(file))
  return new Map(files.map((file) => [file, relativeImports(file)]))
}

/** Every cycle's path, found by depth-first search (white/grey/black). */
function cycles(graph: Map<string, string[]>): string[][] {
  const state = new Map<string, 'open' | 'done'>()
  const found: string[][] = []
  const visit = (file: string, path: string[]) => {
    if (state.get(file) === 'done') return
    if (state.get(file) === 'open') {
      found.push([...path.slice(path.indexOf(file)), file])
      return
    }
    state.set(file, 'open')
    for (const next of graph.get(file) ?? []) visit(next, [...path, file])
    state.set(file, 'done')
  }
  for (const file of graph.keys()) visit(file, [])
  return found
}

const src = importGraph('src/**/*.ts')

test('architecture: no import cycle in src/', () => {
  assert.deepEqual(
    cycles(src).map((cycle) => cycle.join(' → ')),
    [],
  )
})

test('architecture: the cycle finder finds a cycle when there is one', () => {
  const graph = new Map([
    ['a.ts', ['b.ts']],
    ['b.ts', ['c.ts']],
    ['c.ts', ['a.ts']],
  ])
  assert.deepEqual(cycles(graph), [['a.ts', 'b.ts', 'c.ts', 'a.ts']])
})

/** What each lower layer may import from src/ (besides its own folder). */
const LOWER_LAYERS: Array<{ folder: string; mayImport: RegExp }> = [
  // The contract is the bottom: it depends on nothing of ours but the error catalog.
  { folder: 'src/contract/', mayImport: /^src\/(contract\/|errors\.ts$)/ },
  // The engines store (config → store); they know nothing of HTTP, the app or the process.
  {
    folder: 'src/store/',
    mayImport: /^src\/(store\/|contract\/|config\.ts$|clock\.ts$|outage-log\.ts$|errors\.ts$)/,
  },
  { folder: 'src/keys/', mayImport: /^src\/(keys\/|store\/store\.ts$)/ },
]

for (const { folder, mayImport } of LOWER_LAYERS) {
  test(`architecture: ${folder} imports only what lies below it`, () => {
    const upward = [...src]
      .filter(([file]) => file.startsWith(folder))
      .flatMap(([file, imports]) => imports.map((target) => `${file} → ${target}`))
      .filter((edge) => !mayImport.test(edge.split(' → ')[1] as string))
    assert.deepEqual(upward, [])
  })
}

test('architecture: the client imports nothing outside client/ (D18)', () => {
  const client = importGraph('client/src/**/*.ts')
  const outside = [...client]
    .flatMap(([file, imports]) => imports.map((target) => `${file} → ${target}`))
    .filter((edge) => !(edge.split(' → ')[1] as string).startsWith('client/'))
  assert.deepEqual(outside, [])
})

test('architecture: the README layout names every file and folder at the top of src/', () => {
  const readme = readFileSync('README.md', 'utf8')
  const layout = readme.slice(readme.indexOf('**Layout.**'))
  const block = layout.slice(
    layout.indexOf('```'),
    layout.indexOf('```', layout.indexOf('```') + 3),
  )
  const named = new Set([...block.matchAll(/^ {2}([\w.-]+\/?)/gm)].map(([, name]) => name))
  const entries = readdirSync('src', { withFileTypes: true }).map((entry) =>
    entry.isDirectory() ? `${entry.name}/` : entry.name,
  )
  assert.deepEqual(
    entries.filter((entry) => !named.has(entry)),
    [],
  )
})

/** Bare imports of a module (`node:…`, packages), static and dynamic. */
function bareImports(file: string): string[] {
  const source = readFileSync(file, 'utf8')
  const found = [...source.matchAll(/(?:from|import)\s*\(?\s*'([^'.][^']*)'/g)]
  return found.map(([, target]) => target as string)
}

/**
 * What makes a file unfit to share a process with the others: it starts child processes, a
 * cluster or a browser (directly, or through any module it imports, src/ included), puts a proxy
 * in front of the database, or fills a disk.
 */
const STARTS_PROCESSES = /^(node:)?(child_process|cluster)$|^playwright/
const WAITS_ON_OTHERS = /\/helpers\/(tcp-proxy|full-disk)\.ts$/

function startsProcesses(file: string, seen = new Set<string>()): boolean {
  if (seen.has(file)) return false
  seen.add(file)
  if (WAITS_ON_OTHERS.test(file)) return true
  if (bareImports(file).some((target) => STARTS_PROCESSES.test(target))) return true
  return relativeImports(file).some((target) => startsProcesses(target, seen))
}

test('test layout: a test file that starts processes runs in a process of its own (test/groups.ts)', () => {
  const isolated = new Set(globSync(ISOLATED))
  const unlisted = globSync('test/**/*.test.ts').filter(
    (file) => startsProcesses(normalize(file)) && !isolated.has(file),
  )
  assert.deepEqual(unlisted, [], 'add these to ISOLATED in test/groups.ts')
  // The check finds what it should: every listed file is one it would have asked for.
  assert.deepEqual(
    [...isolated].filter((file) => !startsProcesses(normalize(file))),
    [],
    'files in ISOLATED that start nothing (or the check no longer sees how they do)',
  )
  assert.deepEqual(
    ISOLATED.filter((file) => !isolated.has(file)),
    [],
    'files listed in ISOLATED that do not exist',
  )
})
