// The OpenAPI document writes each header that is always present, each error example and each
// error response once, under `components`, and the operations refer to them with `$ref`; an
// optional header is written out where it is used (headerObject below says why). The routes
// declare responses in full (Fastify serialises with them; contract/responses.ts);
// @fastify/swagger writes them out in full on every response (30 KB for three operations), so
// this pass, run once when the document is built, moves them into `components`. Nothing here
// describes a response itself: headers come from `headers`, examples from the error catalog.
import { isDeepStrictEqual } from 'node:util'
import { type ErrorCode, errorCodes } from '../errors.ts'
import { errorExample, type HeaderSpec, headers } from './responses.ts'

interface Reference {
  $ref: string
}

interface MediaType {
  schema?: unknown
  examples?: Record<string, unknown>
}

interface Response {
  description: string
  headers?: Record<string, unknown>
  content?: Record<string, MediaType>
}

interface Document {
  paths?: Record<string, Record<string, { responses?: Record<string, Response | Reference> }>>
  components?: Record<string, Record<string, unknown> | undefined>
}

/** `retryAfterInUse` is the component `RetryAfterInUse`. */
function componentName(key: string): string {
  return key.charAt(0).toUpperCase() + key.slice(1)
}

/** `idempotency_key_in_use` is `IdempotencyKeyInUse`. */
function pascalCase(code: string): string {
  return code
    .split('_')
    .map((word) => (word === 'in' ? 'In' : componentName(word)))
    .join('')
}

/**
 * A header as the document writes it. One that every response declaring it carries is
 * `required` and written once under components. An optional one is written out on each response
 * that may carry it, without `required`: openapi-typescript types a `$ref`'d response header as
 * always present, whatever the component says (its transform/response-object: `"$ref" in
 * headerObject || headerObject.required` decides the `?`), and a Reference Object cannot carry
 * `required` beside its `$ref`.
 */
function headerObject(spec: HeaderSpec) {
  return {
    description: spec.description,
    ...(spec.required ? { required: true } : {}),
    schema: { type: spec.type, ...(spec.pattern === undefined ? {} : { pattern: spec.pattern }) },
    example: spec.example,
  }
}

/** The header specs, by the description @fastify/swagger copies onto every use of one. */
const headerByDescription = new Map(
  Object.entries(headers).map(([key, spec]) => [
    spec.description,
    { name: componentName(key), spec },
  ]),
)

/** What the document refers to: only those are written under components. */
interface Used {
  headers: Set<string>
  examples: Set<string>
}

function headerRef(header: unknown, used: Used): unknown {
  const description = (header as { description?: unknown }).description
  const known = typeof description === 'string' ? headerByDescription.get(description) : undefined
  if (known === undefined) return header
  if (!known.spec.required) return headerObject(known.spec)
  used.headers.add(known.name)
  return { $ref: `#/components/headers/${known.name}` }
}

function exampleRefs(media: MediaType, used: Used): MediaType {
  if (media.examples === undefined) return media
  const examples = Object.fromEntries(
    Object.keys(media.examples).map((code) => {
      used.examples.add(code)
      return [code, { $ref: `#/components/examples/${code}` }]
    }),
  )
  return { ...media, examples }
}

function withReferences(response: Response, used: Used): Response {
  const referenced: Response = { ...response }
  if (response.headers !== undefined) {
    referenced.headers = Object.fromEntries(
      Object.entries(response.headers).map(([name, header]) => [name, headerRef(header, used)]),
    )
  }
  if (response.content !== undefined) {
    referenced.content = Object.fromEntries(
      Object.entries(response.content).map(([type, media]) => [type, exampleRefs(media, used)]),
    )
  }
  return referenced
}

/**
 * The name of an error response: its codes (`Unauthorized`), and `…OnDeprecated` for those of a
 * deprecated operation, which carry the deprecation headers too.
 */
function errorResponseName(response: Response): string {
  const codes = Object.keys(response.content?.['application/json']?.examples ?? {})
  if (codes.length === 0)
    throw new Error(`error response without examples: ${response.description}`)
  const deprecated = response.headers?.Deprecation !== undefined
  return `${codes.map(pascalCase).join('Or')}${deprecated ? 'OnDeprecated' : ''}`
}

export function referenceComponents<T>(input: T): T {
  const document = input as Document
  const errorResponses: Record<string, Response> = {}
  const used: Used = { headers: new Set(), examples: new Set() }
  for (const item of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(item)) {
      const { responses } = operation
      if (responses === undefined) continue
      for (const [status, response] of Object.entries(responses)) {
        if ('$ref' in response) continue
        const referenced = withReferences(response, used)
        if (Number(status) < 400) {
          responses[status] = referenced
          continue
        }
        const name = errorResponseName(referenced)
        const known = errorResponses[name]
        if (known !== undefined && !isDeepStrictEqual(known, referenced)) {
          throw new Error(`two different error responses would be components.responses.${name}`)
        }
        errorResponses[name] = referenced
        responses[status] = { $ref: `#/components/responses/${name}` }
      }
    }
  }
  document.components = {
    ...document.components,
    headers: Object.fromEntries(
      Object.entries(headers)
        .map(([key, spec]) => [componentName(key), headerObject(spec)] as const)
        .filter(([name]) => used.headers.has(name)),
    ),
    examples: Object.fromEntries(
      errorCodes
        .filter((code) => used.examples.has(code))
        .map((code: ErrorCode) => [code, errorExample(code)] as const),
    ),
    responses: Object.fromEntries(
      Object.entries(errorResponses).sort(([a], [b]) => a.localeCompare(b)),
    ),
  }
  return input
}
