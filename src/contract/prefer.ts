// The `Prefer` request header (RFC 7240) as the OpenAPI document shows it: honoured in staging
// only, so that a client can be tried against answers that are hard to provoke. It is one
// parameter under `components.parameters`, referred to by every operation, and added where the
// document is built (plugins/openapi.ts) rather than declared in the routes' `headers`: a route's
// headers schema is a validation step on every request, and listPets and getPet must not gain
// one. The service reads the field itself.
import { PREFER_DELAY_MAX_MS } from './limits.ts'

const description = `Honoured in staging only (a deployment with \`PETSTORE_ENV=staging\`), to try a client against answers that are hard to provoke; production ignores every \`Prefer\` and sends no \`Preference-Applied\`. The preferences are RFC 7240's, spelled as Prism spells them:

- \`code=<status>\`: for a status this operation documents as an error (one of its 4xx and 5xx responses), the service answers that status as it would for real (the Error body, \`Retry-After\` and the rate-limit fields where they belong, \`X-Request-Id\`) without touching the store, and says \`Preference-Applied: code=<status>\`. For the operation's success status the request is served for real, and \`Preference-Applied\` says \`code=<status>\` when the answer has that status. Any other status is a 400 \`invalid_request\` naming the statuses allowed.
- \`delay=<ms>\`, an integer from 0 to ${PREFER_DELAY_MAX_MS}: the answer is held that long, and \`Preference-Applied\` says \`delay=<ms>\`.

Both may be combined: \`Prefer: code=503, delay=300\`. A staging deployment may also give requests a 429, 500 or 503, or a delay, at random (its \`PETSTORE_STAGING_FAULTS\` setting), each such answer marked \`Petstore-Staging-Fault\`; a request whose \`Prefer\` is honoured meets none. Authentication and the rate limit apply first: a request without a valid key is a 401, and one past its budget a 429, whatever it prefers. \`Preference-Applied\` (RFC 7240 §3) may come with an answer of any status, and in staging only, so it is described here rather than on every response.`

export const preferParameter = {
  name: 'Prefer',
  in: 'header',
  required: false,
  description,
  schema: { type: 'string' },
  example: 'code=503, delay=300',
}

interface Document {
  paths?: Record<string, Record<string, { parameters?: unknown[] }>>
  components?: Record<string, Record<string, unknown> | undefined>
}

/** The document with `Prefer` under components and referred to by every operation. */
export function withPreferParameter<T>(input: T): T {
  const document = input as Document
  for (const item of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(item)) {
      operation.parameters = [
        ...(operation.parameters ?? []),
        { $ref: '#/components/parameters/Prefer' },
      ]
    }
  }
  document.components = {
    ...document.components,
    parameters: { ...document.components?.parameters, Prefer: preferParameter },
  }
  return input
}
