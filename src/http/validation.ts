// Request validation with Ajv, from the contract's TypeBox schemas.
//
// Two Ajv instances: bodies are validated exactly as sent (no type coercion: "5" is not a
// categoryId), while the path and query, which arrive as text, have canonical decimal integers
// turned into numbers first. That is deliberately stricter than Ajv's own coercion, which would
// accept "0x10", " 5" or "1e1" as numbers (D5: anything but a plain integer is a 400).
import { Ajv, type AnySchema, type Options, type ValidateFunction } from 'ajv'
import type { FastifySchemaCompiler, FastifySchemaValidationError } from 'fastify'

const ajvOptions: Options = {
  allErrors: false,
  removeAdditional: false,
  coerceTypes: false,
  // Error messages quote a rule's description (see formatValidationErrors).
  verbose: true,
  // int64 is carried by `minimum`/`maximum`; the format itself is documentation.
  formats: { int64: true },
  // The schemas are ours and fixed; checking them against JSON Schema's meta-schema at every start
  // compiled the meta-schema's own validator in each instance, most of the validator compiler's CPU
  // (docs/benchmarks.md, "Measurements behind choices in the code"). test/openapi.test.ts checks
  // them against it once instead.
  validateSchema: false,
}

const CANONICAL_INTEGER = /^-?(0|[1-9][0-9]*)$/

/**
 * A canonical decimal integer as a number; anything else as it came. So does one past 2^53 − 1,
 * which Number() would round: the schemas refuse it either way, and its message then quotes the
 * digits that were sent rather than the rounded number.
 */
function numberFromText(value: unknown): unknown {
  if (typeof value !== 'string' || !CANONICAL_INTEGER.test(value)) return value
  const number = Number(value)
  return Number.isSafeInteger(number) ? number : value
}

/** Canonical decimal integers become numbers; everything else stays as it came. */
function numbersFromText(data: unknown): unknown {
  if (data === null || typeof data !== 'object') return data
  // An object without a prototype, as Fastify's query parser makes: on a plain object, a
  // "__proto__" parameter would go to the prototype setter, dropped instead of refused as unknown.
  const values: Record<string, unknown> = Object.create(null)
  for (const key of Object.keys(data)) {
    values[key] = numberFromText((data as Record<string, unknown>)[key])
  }
  return values
}

/** The keyword documentedOnly() sets; Fastify's copy of a headers schema keeps it. */
const DOCUMENTED_ONLY = 'x-petstore-documented-only'

/**
 * Marks a route part's schema as documentation only: the OpenAPI document shows it, and the
 * validator compiler does not check requests against it. For a part the handler reads and judges
 * itself, with its own rule and message (createPet's Idempotency-Key, routes/idempotency.ts):
 * Ajv would refuse first, with another message, and would refuse what the handler accepts (the
 * field sent twice with the same value reaches Ajv as Node's two lines joined with ", "). Until
 * the mark, only chance kept it from refusing: Fastify hands a custom compiler the headers schema
 * as written, so its `Idempotency-Key` never met Node's lowercased `idempotency-key`.
 */
export function documentedOnly<T extends object>(schema: T): T {
  return Object.assign(schema, { [DOCUMENTED_ONLY]: true })
}

/** The validator of a documented-only part: every request passes, as if it had no schema. */
const passes = () => true

/**
 * The compiler Fastify calls for each route part (`setValidatorCompiler`), with the contract's
 * shared schemas, which the routes' schemas refer to by `$ref`, added to its Ajv instances.
 */
export function validatorCompiler(
  sharedSchemas: readonly AnySchema[],
): FastifySchemaCompiler<AnySchema> {
  const bodyAjv = ajvWith(sharedSchemas, false)
  const textAjv = ajvWith(sharedSchemas, true)
  return ({ schema, httpPart }) => {
    if (typeof schema === 'object' && DOCUMENTED_ONLY in schema) return passes
    if (httpPart !== 'querystring' && httpPart !== 'params') return bodyAjv.compile(schema)
    const validate: ValidateFunction = textAjv.compile(schema)
    const validateText = (data: unknown) => {
      const value = numbersFromText(data)
      if (validate(value)) return { value }
      validateText.errors = validate.errors
      return false
    }
    validateText.errors = null as ValidateFunction['errors']
    return validateText
  }
}

function ajvWith(sharedSchemas: readonly AnySchema[], useDefaults: boolean): Ajv {
  const ajv = new Ajv({ ...ajvOptions, useDefaults })
  for (const schema of sharedSchemas) ajv.addSchema(schema)
  return ajv
}

/**
 * The validator a request body gets (validatorCompiler), for a JSON value that comes another way:
 * `petstore staging seed --from FILE` checks each pet of its file exactly as createPet checks
 * its body. describeBodyErrors words what it finds.
 */
export function bodyValidator(
  sharedSchemas: readonly AnySchema[],
  schema: AnySchema,
): ValidateFunction {
  return ajvWith(sharedSchemas, false).compile(schema)
}

const PART_NAMES: Record<string, string> = {
  body: 'body',
  querystring: 'query parameter',
  params: 'path parameter',
}

/** An Ajv error as `verbose` makes it: with the schema that failed and the data it looked at. */
type ValidationError = FastifySchemaValidationError & {
  parentSchema?: { description?: string; type?: unknown; minimum?: number; maximum?: number }
  data?: unknown
}

/** How much of a refused path or query value a message quotes: enough to recognise it. */
const QUOTED_VALUE_MAX = 32

/**
 * One message for any failure of an integer (wrong type, too small, too large): the whole rule,
 * with the range the contract's schema carries (limits.ts). In the path and query only canonical
 * decimal text becomes a number (numbersFromText), so the rule says so, and quotes the text that
 * came: `05`, `+5`, `1e1`, ` 5` and `0x10` all fail it, and the client learns how to write the
 * value, not only that it is not an integer (D5, D7). A body's value is the client's own JSON,
 * where a number past 2^53 − 1 has already been rounded; it is not quoted.
 */
function integerRule(where: string, error: ValidationError, part: string): string {
  const { minimum, maximum } = error.parentSchema ?? {}
  const range =
    (minimum === undefined ? '' : ` from ${minimum}`) +
    (maximum === undefined ? '' : ` to ${maximum}`)
  if (part === 'body') return `${where} must be an integer${range}`
  const text = String(error.data)
  const sent = text.length > QUOTED_VALUE_MAX ? `${text.slice(0, QUOTED_VALUE_MAX)}…` : text
  return `${where} must be an integer${range}, written in plain digits with no leading zero (got ${JSON.stringify(sent)})`
}

/**
 * `whole`: what the message calls the value as a whole, "body" for a request's (the CLI checks
 * pets of a file as bodies, each called by its place in the file).
 */
function describeError(
  error: ValidationError,
  part: string,
  whole = PART_NAMES[part] ?? part,
): string {
  const field = error.instancePath.replace(/^\//, '').replaceAll('/', '.')
  const params = error.params as Record<string, unknown>
  const where = field === '' ? whole : `${part === 'body' ? '' : `${whole} `}${field}`
  switch (error.keyword) {
    case 'required':
      return `${whole} "${String(params.missingProperty)}" is required`
    case 'additionalProperties': {
      const unknown = unknownFields(error)
      const names = `"${unknown.join('", "')}"`
      if (part !== 'body') return `unknown ${whole}${unknown.length === 1 ? '' : 's'} ${names}`
      return `${whole} has ${unknown.length === 1 ? 'an unknown field' : 'unknown fields:'} ${names}; a NewPet has only name, categoryId and status`
    }
    case 'enum':
      return `${where} must be one of ${(params.allowedValues as unknown[]).join(', ')}`
    case 'pattern':
      return `${where} is not valid: ${error.parentSchema?.description ?? 'it does not match its pattern'}`
    case 'type':
      if (field === '' && part === 'body') return `${whole} must be a JSON object`
      if (Array.isArray(error.data)) return `${where} must be given once`
      if (params.type === 'integer') return integerRule(where, error, part)
      return `${where} must be a ${String(params.type)}`
    case 'minimum':
    case 'maximum':
      if (error.parentSchema?.type === 'integer') return integerRule(where, error, part)
      return `${where} ${error.message ?? 'is invalid'}`
    default:
      return `${where} ${error.message ?? 'is invalid'}`
  }
}

/**
 * Every field of an object that its schema does not list, in the order they came (D6 names them
 * all). Ajv stops at the first error and reports one; with `verbose` the error carries the object
 * and its schema, so the rest are found here, once a message is needed. Asking Ajv for every
 * error (`allErrors`) would make it collect them for every invalid body, and cost about twice as
 * much on the bodies built to be expensive (docs/benchmarks.md, "Measurements behind choices in
 * the code").
 */
function unknownFields(error: ValidationError): string[] {
  const params = error.params as Record<string, unknown>
  const properties = (error.parentSchema as { properties?: object } | undefined)?.properties
  if (typeof error.data !== 'object' || error.data === null || properties === undefined) {
    return [String(params.additionalProperty)]
  }
  return Object.keys(error.data).filter((key) => !Object.hasOwn(properties, key))
}

/** Fastify's schemaErrorFormatter: one message naming the field and the rule (D4). */
export function formatValidationErrors(
  errors: FastifySchemaValidationError[],
  part: string,
): Error {
  const first = errors[0]
  return new Error(first ? describeError(first, part) : `${part} is invalid`)
}

/**
 * What bodyValidator found, in the words a body's 400 uses, with `whole` for "body" (for a pet
 * of a file: "pet has an unknown field "id"", "name is not valid: …").
 */
export function describeBodyErrors(errors: ValidateFunction['errors'], whole: string): string {
  const first = errors?.[0] as ValidationError | undefined
  return first ? describeError(first, 'body', whole) : `${whole} is invalid`
}
