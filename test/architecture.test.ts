// The layout is part of the design (docs/architecture.md): data flows config → store → http →
// process, each folder of src/ is one layer and each module holds one concern. These checks keep
// it so: no import cycle anywhere in src/, every part of src/ imports only from the layers below
// it, and the client never imports the server's code (D18).
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

/**
 * The layers of src/, bottom first (docs/architecture.md, "Layout"). Each entry of src/ (a folder or a file at
 * its top) stands in one layer and imports only from layers below its own, or from itself:
 * the shared words (errors, the clock, the lifecycle, printable text), then the contract, the outage log and
 * staging's rules and the names of unknown settings, the configuration, the stores and rate-limit counters, what works on a store
 * (keys, observability, operations), HTTP, the process, and the command line on top.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['errors.ts', 'clock.ts', 'lifecycle.ts', 'printable.ts', 'release.ts'],
  ['contract/', 'outage-log.ts'],
  ['staging/', 'unknown-settings.ts'],
  ['config.ts'],
  ['store/', 'rate-limit/'],
  ['keys/', 'observability/', 'operations/'],
  ['http/'],
  ['process/'],
  ['cli/'],
]

/** The entry of src/ a path belongs to: `store/` for src/store/sqlite/store.ts, `config.ts` for itself. */
function entryOf(path: string): string | undefined {
  const [top, first, ...rest] = path.split('/')
  if (top !== 'src' || first === undefined) return undefined
  return rest.length > 0 ? `${first}/` : first
}

/** Imports between entries of src/ that do not go to a lower layer. */
function importsNotDown(
  graph: Map<string, string[]>,
  layers: readonly (readonly string[])[],
): string[] {
  const layerOf = new Map(layers.flatMap((entries, level) => entries.map((e) => [e, level])))
  return [...graph].flatMap(([file, imports]) => {
    const from = entryOf(file)
    return imports
      .filter((target) => {
        const to = entryOf(target)
        if (from === undefined || to === undefined || to === from) return false
        return !((layerOf.get(to) ?? Number.POSITIVE_INFINITY) < (layerOf.get(from) ?? -1))
      })
      .map((target) => `${file} → ${target}`)
  })
}

test('architecture: every entry of src/ stands in a layer', () => {
  const placed = new Set(LAYERS.flat())
  const entries = readdirSync('src', { withFileTypes: true }).map((entry) =>
    entry.isDirectory() ? `${entry.name}/` : entry.name,
  )
  assert.deepEqual(
    entries.filter((entry) => !placed.has(entry)),
    [],
    'place it in LAYERS',
  )
})

test('architecture: each part of src/ imports only from the layers below it', () => {
  assert.deepEqual(importsNotDown(src, LAYERS), [])
})

test('architecture: the storage engines never import each other (they share store/*.ts)', () => {
  const engines = ['src/store/sqlite/', 'src/store/postgres/']
  const across = [...src].flatMap(([file, imports]) => {
    const own = engines.find((engine) => file.startsWith(engine))
    if (own === undefined) return []
    return imports
      .filter((target) => engines.some((engine) => engine !== own && target.startsWith(engine)))
      .map((target) => `${file} → ${target}`)
  })
  assert.deepEqual(across, [])
})

test('architecture: the layer check finds an import that runs up or sideways', () => {
  const graph = new Map([
    ['src/store/sqlite/store.ts', ['src/http/app.ts', 'src/store/store.ts', 'src/config.ts']],
    ['src/keys/verifier.ts', ['src/observability/metrics.ts']],
    ['src/new/thing.ts', ['src/config.ts']],
  ])
  assert.deepEqual(importsNotDown(graph, LAYERS), [
    'src/store/sqlite/store.ts → src/http/app.ts',
    'src/keys/verifier.ts → src/observability/metrics.ts',
    'src/new/thing.ts → src/config.ts',
  ])
})

test('architecture: src/ imports nothing outside it but the client, in the CLI (D18)', () => {
  const outside = [...src]
    .flatMap(([file, imports]) => imports.map((target) => [file, target] as const))
    .filter(([, target]) => !target.startsWith('src/'))
    .filter(([file, target]) => !(file.startsWith('src/cli/') && target.startsWith('client/src/')))
    .map(([file, target]) => `${file} → ${target}`)
  assert.deepEqual(outside, [])
})

test('architecture: the client imports nothing outside client/ (D18)', () => {
  const client = importGraph('client/src/**/*.ts')
  const outside = [...client]
    .flatMap(([file, imports]) => imports.map((target) => `${file} → ${target}`))
    .filter((edge) => !(edge.split(' → ')[1] as string).startsWith('client/'))
  assert.deepEqual(outside, [])
})

test('architecture: the layout in docs/architecture.md names every file and folder at the top of src/', () => {
  const page = readFileSync('docs/architecture.md', 'utf8')
  const layout = page.slice(page.indexOf('**Layout.**'))
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
