// deploy/kubernetes/'s kustomizations rendered as `kubectl apply -k` renders them, for the
// parts of kustomize they use: `resources` (files, and folders holding a kustomization), JSON
// patches (`patches` with a `target` and a list of operations, RFC 6902: add, replace, remove and
// test), `components` (a `kind: Component` kustomization: its resources added, then its patches
// applied, before the overlay's own patches) and `images`. Anything
// else in a kustomization is refused by name rather than left out, so a field added there fails
// here until this file applies it too. No kubectl or kustomize binary is needed:
// test/kubernetes.test.ts checks the result in `npm test`, and test/image/image.ts runs the
// SQLite variant's pod with podman.
import { readFileSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import { parseAllDocuments } from 'yaml'
import { ROOT } from './commands.ts'

export const KUBERNETES = join(ROOT, 'deploy', 'kubernetes')

/** A parsed manifest: what every Kubernetes object has, the rest as the file says. */
export interface Manifest {
  apiVersion: string
  kind: string
  metadata: { name: string; labels?: Record<string, string> }
  [field: string]: unknown
}

/** An entry of a kustomization's `images`. */
export interface ImageOverride {
  name: string
  newName?: string
  newTag?: string
  digest?: string
}

interface PatchOperation {
  op: 'add' | 'replace' | 'remove' | 'test'
  path: string
  value?: unknown
}

const KUSTOMIZATION_FIELDS = new Set([
  'apiVersion',
  'kind',
  'resources',
  'components',
  'patches',
  'images',
])
const COMPONENT_KIND = 'Component'
const PATCH_FIELDS = new Set(['path', 'patch', 'target'])
const TARGET_FIELDS = new Set(['kind', 'name'])

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * Every YAML document of a file, as Kubernetes reads it: YAML 1.1, so that `on`, `yes` and
 * `0700` mean what they mean to the API server (a boolean, a number), not plain strings.
 */
export function parseYaml(text: string, where: string): unknown[] {
  return parseAllDocuments(text, { version: '1.1' }).flatMap((document) => {
    if (document.errors.length > 0) {
      throw new Error(`${where}: ${document.errors.map((error) => error.message).join('; ')}`)
    }
    const value: unknown = document.toJS()
    return value === null || value === undefined ? [] : [value]
  })
}

function asManifest(value: unknown, where: string): Manifest {
  if (
    !isRecord(value) ||
    typeof value.apiVersion !== 'string' ||
    typeof value.kind !== 'string' ||
    !isRecord(value.metadata) ||
    typeof value.metadata.name !== 'string'
  ) {
    throw new Error(`${where}: not a Kubernetes object (apiVersion, kind, metadata.name)`)
  }
  return value as Manifest
}

function readKustomization(folder: string): [Record<string, unknown>, string] {
  const file = join(folder, 'kustomization.yaml')
  const [kustomization] = parseYaml(readFileSync(file, 'utf8'), file)
  if (!isRecord(kustomization)) throw new Error(`${file}: not a mapping`)
  const unknown = Object.keys(kustomization).filter((key) => !KUSTOMIZATION_FIELDS.has(key))
  if (unknown.length > 0) {
    throw new Error(`${file}: ${unknown.join(', ')} not rendered by test/image/kustomize.ts`)
  }
  return [kustomization, file]
}

function resources(kustomization: Record<string, unknown>, folder: string, file: string) {
  return asList(kustomization.resources, `${file} resources`).flatMap((entry) => {
    if (typeof entry !== 'string') throw new Error(`${file}: a resource is not a path`)
    const path = join(folder, entry)
    if (statSync(path).isDirectory()) return render(path)
    return parseYaml(readFileSync(path, 'utf8'), path).map((value) => asManifest(value, path))
  })
}

function applyPatches(
  manifests: Manifest[],
  kustomization: Record<string, unknown>,
  folder: string,
  file: string,
) {
  for (const [i, entry] of asList(kustomization.patches, `${file} patches`).entries()) {
    applyPatch(manifests, entry, folder, `${file} patches[${i}]`)
  }
}

/** A component (kind: Component) onto what its parent has so far: its resources, then patches. */
function applyComponent(manifests: Manifest[], folder: string): void {
  const [component, file] = readKustomization(folder)
  if (component.kind !== COMPONENT_KIND) throw new Error(`${file}: not a kind: Component`)
  manifests.push(...resources(component, folder, file))
  applyPatches(manifests, component, folder, file)
}

/**
 * The manifests a kustomization folder renders to, in the order kustomize lists them.
 * `withComponents`: folders rendered as if listed last in its `components` (an operator's
 * overlay that adds one).
 */
export function render(folder: string, withComponents: readonly string[] = []): Manifest[] {
  const [kustomization, file] = readKustomization(folder)
  if (kustomization.kind === COMPONENT_KIND) throw new Error(`${file}: a component, not an overlay`)
  const manifests = resources(kustomization, folder, file)
  const components = asList(kustomization.components, `${file} components`).map((entry) => {
    if (typeof entry !== 'string') throw new Error(`${file}: a component is not a path`)
    return resolve(folder, entry)
  })
  for (const component of [...components, ...withComponents]) applyComponent(manifests, component)
  refuseDuplicates(manifests, file)
  applyPatches(manifests, kustomization, folder, file)
  const images = asList(kustomization.images, `${file} images`).map((entry) => {
    if (!isRecord(entry) || typeof entry.name !== 'string') {
      throw new Error(`${file}: an image entry has no name`)
    }
    return entry as unknown as ImageOverride
  })
  return applyImages(manifests, images)
}

function asList(value: unknown, where: string): unknown[] {
  if (value === undefined) return []
  if (!Array.isArray(value)) throw new Error(`${where}: not a list`)
  return value
}

/** kustomize refuses two objects of one kind and name. */
function refuseDuplicates(manifests: readonly Manifest[], where: string): void {
  const seen = new Set<string>()
  for (const { kind, metadata } of manifests) {
    const id = `${kind}/${metadata.name}`
    if (seen.has(id)) throw new Error(`${where}: ${id} twice`)
    seen.add(id)
  }
}

function applyPatch(manifests: Manifest[], entry: unknown, folder: string, where: string): void {
  if (!isRecord(entry) || !isRecord(entry.target)) throw new Error(`${where}: no target`)
  const fields = [...Object.keys(entry), ...Object.keys(entry.target)]
  const unknown = fields.filter((key) => !PATCH_FIELDS.has(key) && !TARGET_FIELDS.has(key))
  if (unknown.length > 0) throw new Error(`${where}: ${unknown.join(', ')} not rendered here`)
  const { kind, name } = entry.target
  const text =
    typeof entry.path === 'string'
      ? readFileSync(join(folder, entry.path), 'utf8')
      : typeof entry.patch === 'string'
        ? entry.patch
        : undefined
  if (text === undefined) throw new Error(`${where}: neither path nor patch`)
  const [operations] = parseYaml(text, where)
  // kustomize takes a list for a JSON patch and a mapping for a strategic merge, which this
  // file does not apply.
  if (!Array.isArray(operations)) throw new Error(`${where}: not a JSON patch (a list)`)
  const targets = manifests.filter(
    (manifest) =>
      (kind === undefined || manifest.kind === kind) &&
      (name === undefined || manifest.metadata.name === name),
  )
  if (targets.length === 0) throw new Error(`${where}: its target matches nothing`)
  for (const target of targets) {
    operations.forEach((operation, i) => {
      applyOperation(target, operation, `${where} operation ${i}`)
    })
  }
}

/**
 * One RFC 6902 operation (add, replace, remove, test), in place; a path that is not there
 * throws, and so does a `test` whose value differs (kustomize stops there too).
 */
export function applyOperation(document: unknown, operation: unknown, where: string): void {
  if (!isRecord(operation) || typeof operation.path !== 'string') {
    throw new Error(`${where}: not an operation`)
  }
  const { op, path, value } = operation as unknown as PatchOperation
  if (op === 'test') {
    const found = valueAt(document, path, where)
    if (!isDeepStrictEqual(found, value)) {
      throw new Error(`${where}: test of ${path} failed: ${JSON.stringify(found)}`)
    }
    return
  }
  if (op !== 'add' && op !== 'replace' && op !== 'remove') {
    throw new Error(`${where}: op ${String(op)} is not applied here`)
  }
  const steps = path
    .split('/')
    .slice(1)
    .map((step) => step.replaceAll('~1', '/').replaceAll('~0', '~'))
  const last = steps.pop()
  if (!path.startsWith('/') || last === undefined) throw new Error(`${where}: bad path ${path}`)
  let parent: unknown = document
  for (const step of steps) {
    const next: unknown = Array.isArray(parent)
      ? parent[index(parent, step, where, false)]
      : isRecord(parent)
        ? parent[step]
        : undefined
    if (next === undefined) throw new Error(`${where}: ${path} — no ${step}`)
    parent = next
  }
  if (Array.isArray(parent)) {
    if (op === 'add' && last === '-') parent.push(value)
    else if (op === 'add') parent.splice(index(parent, last, where, true), 0, value)
    else if (op === 'replace') parent[index(parent, last, where, false)] = value
    else parent.splice(index(parent, last, where, false), 1)
  } else if (isRecord(parent)) {
    if (op !== 'add' && !(last in parent)) throw new Error(`${where}: ${path} is not there`)
    if (op === 'remove') delete parent[last]
    else parent[last] = value
  } else {
    throw new Error(`${where}: ${path} — its parent is not a mapping or a list`)
  }
}

/** The value a JSON pointer names; a path that is not there throws. */
function valueAt(document: unknown, path: string, where: string): unknown {
  let value: unknown = document
  for (const raw of path.split('/').slice(1)) {
    const step = raw.replaceAll('~1', '/').replaceAll('~0', '~')
    value = Array.isArray(value)
      ? value[index(value, step, where, false)]
      : isRecord(value)
        ? value[step]
        : undefined
    if (value === undefined) throw new Error(`${where}: ${path} — no ${step}`)
  }
  return value
}

function index(list: unknown[], step: string, where: string, end: boolean): number {
  const i = /^(0|[1-9]\d*)$/.test(step) ? Number(step) : Number.NaN
  if (!(i < list.length || (end && i === list.length))) {
    throw new Error(`${where}: no item ${step} in a list of ${list.length}`)
  }
  return i
}

/** The pod templates' containers (Deployment, Job), where `images` applies. */
export function containersOf(manifest: Manifest): Record<string, unknown>[] {
  const spec = isRecord(manifest.spec) ? manifest.spec : undefined
  const template = isRecord(spec?.template) ? spec.template : undefined
  const podSpec = isRecord(template?.spec) ? template.spec : undefined
  return ['initContainers', 'containers'].flatMap((field) => {
    const list = podSpec?.[field]
    return Array.isArray(list) ? list.filter(isRecord) : []
  })
}

/** kustomize's `images`: a container's image of that name gets the new name, tag or digest. */
export function applyImages(manifests: Manifest[], images: readonly ImageOverride[]): Manifest[] {
  for (const container of manifests.flatMap(containersOf)) {
    if (typeof container.image !== 'string') continue
    const match = /^([^@]+?)(?::([\w][\w.-]{0,127}))?(?:@(sha256:[0-9a-f]{64}))?$/.exec(
      container.image,
    )
    const override = images.find((image) => image.name === match?.[1])
    if (match === null || override === undefined) continue
    const name = override.newName ?? match[1]
    const digest = override.digest ?? (override.newTag === undefined ? match[3] : undefined)
    const tag = override.newTag ?? (override.digest === undefined ? match[2] : undefined)
    container.image = `${name}${tag === undefined ? '' : `:${tag}`}${digest === undefined ? '' : `@${digest}`}`
  }
  return manifests
}
