// Every relative link in README.md and the pages of docs/ leads somewhere: to a file that exists
// and, with a `#fragment`, to a heading of that page (GitHub's anchors: the heading's text in
// lower case, punctuation dropped, spaces as hyphens; a repeated heading gets -1, -2, …).
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'

const ROOT = fileURLToPath(new URL('../', import.meta.url))

/** README.md, CONTRIBUTING.md, client/README.md and every Markdown page under docs/. */
function pages(): string[] {
  const found = ['README.md', 'CONTRIBUTING.md', 'client/README.md'].map((file) => join(ROOT, file))
  const walk = (folder: string) => {
    for (const entry of readdirSync(folder)) {
      const path = join(folder, entry)
      if (statSync(path).isDirectory()) walk(path)
      else if (entry.endsWith('.md')) found.push(path)
    }
  }
  walk(join(ROOT, 'docs'))
  return found.filter((path) => existsSync(path))
}

/** The page's text without its code: links in code blocks and spans are not links. */
function prose(markdown: string): string {
  return markdown.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '')
}

/** GitHub's anchor for a heading's text. */
export function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[^\p{Letter}\p{Number}\s-]/gu, '')
    .replace(/\s/g, '-')
}

function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  for (const [, text] of markdown.replace(/```[\s\S]*?```/g, '').matchAll(/^#{1,6} (.+)$/gm)) {
    const base = anchorOf(text ?? '')
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    anchors.add(count === 0 ? base : `${base}-${count}`)
  }
  return anchors
}

test('anchors are computed as GitHub computes them', () => {
  assert.equal(
    anchorOf('Behind PgBouncer (transaction pooling)'),
    'behind-pgbouncer-transaction-pooling',
  )
  assert.equal(anchorOf('D22. Container image'), 'd22-container-image')
  assert.equal(anchorOf('Running `petstore serve`'), 'running-petstore-serve')
})

test('every relative link in the README and docs/ resolves to a file and an anchor that exist', () => {
  const broken: string[] = []
  let checked = 0
  for (const page of pages()) {
    const markdown = readFileSync(page, 'utf8')
    for (const [, target] of prose(markdown).matchAll(/\]\(([^)\s]+)\)/g)) {
      if (target === undefined || /^[a-z]+:/i.test(target)) continue
      const [path = '', fragment] = target.split('#')
      const file = path === '' ? page : join(dirname(page), decodeURIComponent(path))
      checked++
      const where = `${relative(ROOT, page)}: (${target})`
      if (!existsSync(file)) {
        broken.push(`${where}: no ${relative(ROOT, file)}`)
        continue
      }
      if (fragment === undefined || !file.endsWith('.md')) continue
      if (!anchorsOf(readFileSync(file, 'utf8')).has(fragment)) {
        broken.push(`${where}: no heading #${fragment} in ${relative(ROOT, file)}`)
      }
    }
  }
  assert.deepEqual(broken, [])
  assert.ok(checked >= 20, `only ${checked} relative links found: is the link pattern right?`)
})

test("every alert's runbook_url (deploy/monitoring/petstore.rules.yaml) is a heading of docs/operations.md", () => {
  interface Rule {
    alert?: string
    annotations?: { runbook_url?: string }
  }
  const { groups } = parse(
    readFileSync(join(ROOT, 'deploy', 'monitoring', 'petstore.rules.yaml'), 'utf8'),
  ) as { groups: { rules: Rule[] }[] }
  const alerts = groups.flatMap((group) => group.rules).filter((rule) => rule.alert !== undefined)
  const operations = anchorsOf(readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8'))
  const broken = alerts.filter((rule) => {
    const [file, fragment = ''] = (rule.annotations?.runbook_url ?? '').split('#')
    return file !== 'docs/operations.md' || !operations.has(fragment)
  })
  assert.deepEqual(
    broken.map((rule) => `${rule.alert}: ${rule.annotations?.runbook_url}`),
    [],
  )
  assert.ok(alerts.length >= 10, `only ${alerts.length} alerts found`)
})
