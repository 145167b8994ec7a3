// No regular expression of ours can be made to backtrack: a pattern whose running time grows
// faster than linearly with its input is a denial of service anyone can send when it sees a
// header, a query, a path or a body (the Bearer check once did: one header held the event loop,
// D2). Every pattern in the code that runs (src/, client/src/, bin/) and
// every `pattern` of the contract (docs/openapi.json, which Ajv compiles to validate request
// bodies) is checked with recheck, a ReDoS checker that decides by automata and fuzzing. A
// `new RegExp(…)` built at run time cannot be checked here, so it is refused: write a literal.
import assert from 'node:assert/strict'
import { globSync, readFileSync } from 'node:fs'
import { stripTypeScriptTypes } from 'node:module'
import { test } from 'node:test'
import { type Node, parse } from 'acorn'
import { full } from 'acorn-walk'
import { check } from 'recheck'

interface Found {
  where: string
  source: string
  flags: string
}

const CODE = ['src/**/*.ts', 'client/src/**/*.ts', 'bin/*.js']

/** The JavaScript a file runs: TypeScript with its types stripped (as Node.js runs it). */
function javascriptOf(file: string): string {
  const text = readFileSync(file, 'utf8')
  return file.endsWith('.ts') ? stripTypeScriptTypes(text, { mode: 'strip' }) : text
}

type RegexLiteral = Node & { regex?: { pattern: string; flags: string } }
type Construction = Node & { callee: Node & { name?: string } }

/**
 * The regular expression literals of every file, and the RegExp constructions, by place. Three
 * tests read them: the files are parsed once (each parse of them all cost ~0.4 s of CPU).
 */
function regularExpressionsInCode(): { literals: Found[]; constructed: string[] } {
  scanned ??= scanCode()
  return scanned
}
let scanned: { literals: Found[]; constructed: string[] } | undefined

function scanCode(): { literals: Found[]; constructed: string[] } {
  const literals: Found[] = []
  const constructed: string[] = []
  for (const file of CODE.flatMap((pattern) => globSync(pattern)).sort()) {
    const program = parse(javascriptOf(file), {
      ecmaVersion: 'latest',
      sourceType: 'module',
      locations: true,
    })
    const at = (node: Node) => `${file}:${node.loc?.start.line}`
    full(program, (node) => {
      const { regex } = node as RegexLiteral
      if (node.type === 'Literal' && regex !== undefined) {
        literals.push({ where: at(node), source: regex.pattern, flags: regex.flags })
      }
      const { callee } = node as Construction
      if (
        (node.type === 'NewExpression' || node.type === 'CallExpression') &&
        callee.type === 'Identifier' &&
        callee.name === 'RegExp'
      ) {
        constructed.push(at(node))
      }
    })
  }
  return { literals, constructed }
}

/** Every `pattern` keyword of the OpenAPI document: Ajv compiles each with the `u` flag. */
function patternsOfTheContract(): Found[] {
  const found: Found[] = []
  const visit = (value: unknown, path: string) => {
    if (Array.isArray(value)) {
      for (const [i, item] of value.entries()) visit(item, `${path}/${i}`)
    } else if (typeof value === 'object' && value !== null) {
      for (const [key, inner] of Object.entries(value)) {
        if (key === 'pattern' && typeof inner === 'string') {
          found.push({ where: `docs/openapi.json#${path}`, source: inner, flags: 'u' })
        } else visit(inner, `${path}/${key}`)
      }
    }
  }
  visit(JSON.parse(readFileSync('docs/openapi.json', 'utf8')), '')
  return found
}

async function verdict({ source, flags }: Pick<Found, 'source' | 'flags'>): Promise<string> {
  const result = await check(source, flags, { timeout: 30_000 })
  if (result.status === 'safe') return 'safe'
  if (result.status === 'vulnerable') {
    return `vulnerable (${result.complexity.summary}; attack: ${result.attack.pattern})`
  }
  return `undecided (${result.status})`
}

test('the checker finds the quadratic Bearer pattern that the auth check once used', async () => {
  assert.match(await verdict({ source: '^bearer(?: +(\\S*))? *$', flags: 'i' }), /^vulnerable/)
})

test('the scan finds the literals of the code and the patterns of the contract', () => {
  const { literals } = regularExpressionsInCode()
  const places = new Set(literals.map(({ where }) => where.replace(/:\d+$/, '')))
  // Files known to hold regular expressions that see request input.
  for (const file of ['src/http/plugins/request-id.ts', 'src/http/plugins/request-log.ts']) {
    assert.ok(places.has(file), `no regular expression found in ${file}`)
  }
  assert.ok(patternsOfTheContract().length > 0, 'no pattern found in docs/openapi.json')
})

test('no RegExp is built at run time, where it could not be checked', () => {
  assert.deepEqual(regularExpressionsInCode().constructed, [])
})

test('every regular expression runs in linear time (recheck)', async () => {
  const all = [...regularExpressionsInCode().literals, ...patternsOfTheContract()]
  // The verdict depends on the source and the flags alone: each is checked once (81 places
  // held 65 distinct ones), and a pattern that is not safe is reported at every place.
  const places = new Map<string, Found[]>()
  for (const found of all) {
    const same = `${found.flags}/${found.source}`
    places.set(same, [...(places.get(same) ?? []), found])
  }
  const unsafe: string[] = []
  for (const [first, ...others] of places.values()) {
    if (first === undefined) continue
    const result = await verdict(first)
    if (result === 'safe') continue
    for (const found of [first, ...others]) {
      unsafe.push(`${found.where} /${found.source}/${found.flags}: ${result}`)
    }
  }
  assert.deepEqual(unsafe, [], `${unsafe.length} of ${all.length} patterns are not safe`)
})
