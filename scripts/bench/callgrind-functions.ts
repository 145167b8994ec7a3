// Instructions by function, for instructions.ts --by-function. Callgrind knows native functions
// by their symbols but sees V8's generated code as anonymous memory (object "???"), naming each
// stretch of it after the address it was entered at, whatever it then jumps into. So every
// instruction is placed by its own address (callgrind's --dump-instr=yes): native ones under their
// symbol, generated ones under the function of V8's perf map (node --perf-basic-prof, which
// also keeps V8 from moving code) whose range holds it, the entry written last winning where
// code was freed and its memory reused. Costs are self costs: each instruction counted once, so
// the rows add up to callgrind's total exactly; what no symbol and no map entry covers is
// "unattributed". Each function also belongs to a concern (concernOf), its file or its library.
import { createReadStream, readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { int } from './harness.ts'

interface MapEntry {
  start: number
  end: number
  name: string
  order: number
}

function perfMap(path: string): (address: number) => string | undefined {
  const entries: MapEntry[] = readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line, order) => {
      const [start = '', size = '', ...name] = line.split(' ')
      const from = Number.parseInt(start, 16)
      return { start: from, end: from + Number.parseInt(size, 16), name: name.join(' '), order }
    })
    .sort((a, b) => a.start - b.start)
  const longest = Math.max(0, ...entries.map((e) => e.end - e.start))
  const cache = new Map<number, string | undefined>()
  return (address) => {
    if (cache.has(address)) return cache.get(address)
    let low = 0
    let high = entries.length
    while (low < high) {
      const mid = (low + high) >> 1
      if ((entries[mid]?.start ?? 0) <= address) low = mid + 1
      else high = mid
    }
    let found: MapEntry | undefined
    for (let i = low - 1; i >= 0; i--) {
      const entry = entries[i] as MapEntry
      if (entry.start + longest <= address) break
      if (address < entry.end && (found === undefined || entry.order > found.order)) found = entry
    }
    cache.set(address, found?.name)
    return found?.name
  }
}

/** V8's tier marks (~ interpreted, ^ Sparkplug, + Maglev, * TurboFan; o OSR, ' context). */
const jsName = (name: string) => name.replace(/^JS:o?[~^+*]'?/, 'JS ')

/**
 * Self instructions by function, summed over the callgrind file, and callgrind's total; and the
 * calls made to each function, by caller (callgrind's arcs, placed by their call site).
 */
export async function selfCosts(callgrindFile: string, perfMapFile: string) {
  const inMap = perfMap(perfMapFile)
  const place = (object: string, fn: string, address: string) =>
    object === '???'
      ? jsName(inMap(Number.parseInt(address, 16)) ?? 'unattributed')
      : `${object.slice(object.lastIndexOf('/') + 1)} ${fn.replace(/'\d+$/, '')}`
  const costs = new Map<string, number>()
  const callers = new Map<string, Map<string, number>>()
  let object = ''
  let fn = ''
  let callee: string | undefined // the callee of the arc whose cost line comes next
  let calls = 0
  let calleeObject: string | undefined
  let calleeFn = ''
  let total = 0
  for await (const line of createInterface({ input: createReadStream(callgrindFile) })) {
    if (line.startsWith('0x')) {
      const [address = '', , instructions = '0'] = line.split(' ')
      const name = place(object, fn, address)
      if (callee === undefined) add(costs, name, Number(instructions))
      else if (callee !== name) {
        const of = callers.get(callee) ?? new Map<string, number>()
        callers.set(callee, add(of, name, calls))
      }
      callee = undefined
    } else if (line.startsWith('ob=')) object = line.slice(3)
    else if (line.startsWith('fn=')) fn = line.slice(3)
    else if (line.startsWith('cob=')) calleeObject = line.slice(4)
    else if (line.startsWith('cfn=')) calleeFn = line.slice(4)
    else if (line.startsWith('calls=')) {
      const [count = '', target = ''] = line.slice(6).split(' ')
      callee = place(calleeObject ?? object, calleeFn, target)
      calls = Number(count)
      calleeObject = undefined
    } else if (line.startsWith('summary: ')) total = Number(line.slice(9).split(' ')[0])
  }
  return { costs, callers, total }
}

const add = (map: Map<string, number>, key: string, n: number) =>
  map.set(key, (map.get(key) ?? 0) + n)

/** Concerns whose functions do work on behalf of their callers (charged). */
const SERVING = new Set([
  'V8 builtins',
  'V8 interpreter (bytecode handlers)',
  'V8 runtime (C++)',
  'V8 regular expressions',
  'V8 generated code, other (stubs, handlers)',
  'libc (malloc, memcpy, syscall wrappers)',
  'C++ library code in node',
  'libstdc++',
])

/**
 * Self costs with those of V8's builtins and runtime, the regular expressions and libc charged
 * to the nearest caller outside them (a JS function, or native code such as SQLite's or the
 * garbage collector's), split among several callers in proportion to their calls, as gprof
 * does. The total stays the same; how a shared builtin's cost is split is an estimate.
 */
export function chargedToCallers(
  costs: Map<string, number>,
  callers: Map<string, Map<string, number>>,
): Map<string, number> {
  const owners = new Map<string, Map<string, number>>()
  const onStack = new Set<string>()
  const ownersOf = (name: string): Map<string, number> => {
    const known = owners.get(name)
    if (known !== undefined) return known
    const own = new Map([[name, 1]])
    const of = [...(callers.get(name) ?? [])].filter(([caller]) => !onStack.has(caller))
    const calls = of.reduce((sum, [, n]) => sum + n, 0)
    if (!SERVING.has(concernOf(name)) || calls === 0) return own
    onStack.add(name)
    const result = new Map<string, number>()
    for (const [caller, n] of of) {
      for (const [owner, share] of ownersOf(caller)) add(result, owner, (share * n) / calls)
    }
    onStack.delete(name)
    owners.set(name, result)
    return result
  }
  const charged = new Map<string, number>()
  for (const [name, n] of costs) {
    for (const [owner, share] of ownersOf(name)) add(charged, owner, n * share)
  }
  return charged
}

const NODE_JS_CONCERNS: [RegExp, string][] = [
  [/^node:(_http_|internal\/http)/, 'node:http (JS)'],
  [/^node:(net|internal\/(streams|stream_base|net|dtrace))/, 'node:net and streams (JS)'],
  [
    /^node:(events|timers|internal\/(timers|process|async_hooks|event_target))/,
    'node: events, timers, ticks (JS)',
  ],
]
const NATIVE_CONCERNS: [RegExp, string][] = [
  [/^node Builtins_\w*Handler(Wide|ExtraWide)?$/, 'V8 interpreter (bytecode handlers)'],
  [/^node Builtins_/, 'V8 builtins'],
  [
    /^node [^(]*(Heap|Scaveng|Mark|Sweep|Evacuat|Minor|Young|Concurrent|Remembered|Slot|MemoryChunk|Page|Space\b|Allocator|Safepoint|Pretenur|GC|Incremental|TracedHandles|GlobalHandles|Visitor|Iterate\w*ObjectCache)/,
    'V8 garbage collector',
  ],
  [
    /^node (v8::internal::)?(compiler|maglev|turboshaft|baseline|Compiler|Deoptimizer|OptimizingCompile|TieringManager|FeedbackVector)/,
    'V8 compilers and tiering',
  ],
  [/^node (v8::|Builtin_|Runtime_|_ZN2v8)/, 'V8 runtime (C++)'],
  [/^node node::sqlite::/, 'node:sqlite binding (C++)'],
  [
    /^node (llhttp|node::http_parser|node::\(anonymous namespace\)::Parser|\(anonymous namespace\)::Parser)/,
    'llhttp and its binding',
  ],
  [/^node node::/, 'Node.js C++'],
  [/^node uv_|^node uv__/, 'libuv'],
  [/^node (simdutf|ada|icu_|ucnv|u_)/, 'simdutf, ada, ICU'],
  [
    /^node (sha\d|SHA|EVP_|evp_|ossl_|OPENSSL|CRYPTO_|RAND_|rand_|drbg|BN_|bn_|aesni|ChaCha|OBJ_|ERR_|ASN1|md_|OSSL)/,
    'OpenSSL',
  ],
  [/^node (std::|operator|__)/, 'C++ library code in node'],
  [/^node [a-zA-Z_][\w]*$/, 'SQLite (C functions in node)'],
  [/^node /, 'other code in node'],
  [/^libc\.so/, 'libc (malloc, memcpy, syscall wrappers)'],
  [/^libstdc\+\+/, 'libstdc++'],
]

/** The concern a function of selfCosts belongs to: its file, package or library. */
export function concernOf(name: string): string {
  if (name === 'unattributed') return name
  if (name.startsWith('JS ')) {
    const file = name.slice(name.lastIndexOf(' ') + 1).replace(/^file:\/\//, '')
    const ours = /\/(src\/.*?\.ts):/.exec(file)
    if (ours !== null) return `ours: ${ours[1]}`
    const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file)
    if (pkg !== null) return `npm: ${pkg[1]}`
    if (/\/scripts\/bench\//.test(file)) return 'the reference script (JS)'
    for (const [pattern, concern] of NODE_JS_CONCERNS) if (pattern.test(file)) return concern
    if (file.startsWith('node:')) return 'node: other (JS)'
    return 'JS without a file (new Function: compiled serialisers, validators)'
  }
  if (/^(Builtin|BytecodeHandler):/.test(name)) return 'V8 builtins'
  if (name.startsWith('RegExp')) return 'V8 regular expressions'
  if (/^\w+:/.test(name)) return 'V8 generated code, other (stubs, handlers)'
  for (const [pattern, concern] of NATIVE_CONCERNS) if (pattern.test(name)) return concern
  return `other: ${name.slice(0, name.indexOf(' '))}`
}

/**
 * A markdown table of instructions per request, service against reference, by key (function or
 * concern): the `top` largest differences (either sign), then the rest as one row, then the
 * total. Rounded to whole instructions so that the rows add up to the total as printed.
 */
export function differenceTable(
  service: Map<string, number>,
  reference: Map<string, number>,
  requests: { service: number; reference: number },
  top: number,
  heading: string,
  label: (key: string) => string = (key) => key,
): string {
  const keys = [...new Set([...service.keys(), ...reference.keys()])]
  const row = (key: string) => {
    const s = Math.round((service.get(key) ?? 0) / requests.service)
    const r = Math.round((reference.get(key) ?? 0) / requests.reference)
    return { key, s, r, d: s - r }
  }
  const rows = keys.map(row).sort((a, b) => Math.abs(b.d) - Math.abs(a.d))
  const shown = rows.slice(0, top)
  const total = (costs: Map<string, number>, n: number) =>
    Math.round([...costs.values()].reduce((a, b) => a + b, 0) / n)
  const s = total(service, requests.service)
  const r = total(reference, requests.reference)
  const line = (label: string, s: number, r: number, d = s - r) =>
    `| ${label} | ${int(s)} | ${int(r)} | ${d > 0 ? '+' : ''}${int(d)} |\n`
  let out = `| ${heading} | Service | Same bytes | Difference |\n|---|--:|--:|--:|\n`
  for (const item of shown) out += line(label(item.key).replace(/\|/g, '\\|'), item.s, item.r)
  const shownS = shown.reduce((acc, item) => acc + item.s, 0)
  const shownR = shown.reduce((acc, item) => acc + item.r, 0)
  if (rows.length > shown.length) {
    out += line(`everything else (${rows.length - shown.length})`, s - shownS, r - shownR)
  }
  return out + line('**total**', s, r)
}

/** A C++ name without its parameter list. */
export function shortName(name: string): string {
  const tail = name.endsWith(') const') ? name.length - 7 : name.length
  if (!name.includes('::') || name[tail - 1] !== ')') return name
  for (let i = tail - 1, depth = 0; i >= 0; i--) {
    if (name[i] === ')') depth++
    else if (name[i] === '(' && --depth === 0) return `${name.slice(0, i)}()`
  }
  return name
}

/** Concern totals of a function map. */
export function byConcern(costs: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>()
  for (const [name, n] of costs) add(out, concernOf(name), n)
  return out
}
