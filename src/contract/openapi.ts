// The parts of the OpenAPI document that are not routes: info, servers, security, tags.
// Paths and schemas come from the routes and contract/schemas.ts (plugins/openapi.ts).
import { errorCatalog, errorCodes } from '../errors.ts'
import { releaseVersion } from '../release.ts'
import {
  AUTHORIZATION_MAX_LENGTH,
  BODY_LIMIT_BYTES,
  GET_PET_SUNSET_AT,
  LIST_LIMIT,
  MAX_ID,
  NAME_MAX_LENGTH,
} from './limits.ts'

const errorTable = [
  '| code | status | meaning |',
  '|---|---|---|',
  ...errorCodes.map(
    (code) => `| \`${code}\` | ${errorCatalog[code].status} | ${errorCatalog[code].summary} |`,
  ),
].join('\n')

const description = `List, add and retrieve a store's animals.

**Authentication.** Every operation needs \`Authorization: Bearer <API key>\`. A missing or invalid key is a 401 with an RFC 6750 \`WWW-Authenticate\` challenge, and so is an \`Authorization\` field longer than ${AUTHORIZATION_MAX_LENGTH} characters; the field sent more than once is a 400. Keys are checked before anything else in the request.

**Errors.** Every error is \`application/json\` \`{code, message, status}\`; \`status\` equals the HTTP status and \`message\` names the offending field and rule. The codes form a closed list:

${errorTable}

**Versions.** The API's version is the \`/v1\` of its paths: within it, changes are only additions (an optional field, a header, an error code), and anything else would come under \`/v2\`. \`info.version\` is the release of the service that serves this document, the number \`petstore --version\` prints and the service's changelog is organised by; it changes with every release, whether or not the operations changed.

**Pagination.** listPets returns animals in ascending \`id\` order. When more follow, the response has a \`Link\` header (RFC 8288) with one link, \`<URI>; rel="next"\`, e.g. \`Link: </v1/pets?limit=20&status=available&cursor=eyJhZnRlciI6MjB9>; rel="next"\`: the next page's request, relative to the URL called, keeping \`limit\` and \`status\` and adding an opaque \`cursor\`. Follow it (or send its \`cursor\` with the same \`limit\` and \`status\`) until a page comes without one; that page is the last. The body stays a bare array.

**Limits.** \`limit\` is ${LIST_LIMIT.minimum}–${LIST_LIMIT.maximum} (default ${LIST_LIMIT.default}). \`name\` is at most ${NAME_MAX_LENGTH} characters. \`id\` and \`categoryId\` are int64 on the wire, accepted from 1 to ${MAX_ID} (2^53 − 1) so that no JSON client loses precision; larger values are refused, never rounded. Request bodies are at most ${BODY_LIMIT_BYTES} bytes of UTF-8 JSON (RFC 8259 §8.1): bytes that are not UTF-8 are a 400 naming where, a \`charset\` other than UTF-8 is a 415, and an object key given twice (at any depth, however escaped) is a 400 naming it. Unknown query parameters and unknown body fields are refused, and the 400 names every one.

**Rate limits.** Each API key has a budget of requests per minute, stated on every response in the \`RateLimit-Policy\` and \`RateLimit\` fields (draft-ietf-httpapi-ratelimit-headers-10), each an RFC 9651 structured-field List of named policies: \`RateLimit-Policy: "default";q=600;w=60\` (quota \`q\` requests a window of \`w\` seconds) and \`RateLimit: "default";r=599;t=42\` (\`r\` remaining, \`t\` seconds to the reset). Past it: 429 \`rate_limited\` with \`Retry-After\`. Failed authentications are limited per client address too (a deployment setting, a few dozen a minute by default): past that many keys refused as unknown, the address gets 429 \`rate_limited\` with \`Retry-After\` and the \`"auth-failures"\` policy in the same fields until the minute ends, for any key the instance answering has not already seen valid. A request without a key, or with a malformed one, is answered 401 as always.

**Deprecation.** getPet is deprecated and will be removed on ${GET_PET_SUNSET_AT.toUTCString()}; its responses carry \`Deprecation\`, \`Sunset\` and \`Link\` headers, and after that instant it answers 410 \`gone\`. Use listPets with the \`status\` filter instead.

**Tracing.** Every response carries \`X-Request-Id\`; send your own (1–128 of \`A-Z a-z 0-9 . _ : -\`) to have it echoed.`

/**
 * Production and staging share the paths and differ only in base address, which the interface
 * calls {base_url} and {staging_base_url}: server variables, whose defaults are placeholders for
 * the reader to replace (under example.net, a reserved name: redocly's no-server-example.com
 * refuses example.com). "This deployment" comes first, relative (D1): every deployment serves
 * this document, and a relative server is relative to where the document was fetched, so
 * servers[0] is the deployment the reader asked; /docs's "Try it out" uses servers[0], and the
 * page's CSP lets it reach its own origin only. A client generated from the file, whose tools
 * default to servers[0], gets `/v1` with no host and must be told which environment it talks to,
 * rather than being pointed at a placeholder, or at production, without being asked.
 */
const servers: {
  url: string
  description: string
  variables?: Record<string, { default: string; description: string }>
}[] = [
  { url: '/v1', description: 'This deployment: the one that served this document.' },
  {
    url: '{base_url}',
    description: 'Production.',
    variables: {
      base_url: {
        default: 'https://petstore.example.net/v1',
        description: 'The production base address, ending in the version segment `/v1`.',
      },
    },
  },
  {
    url: '{staging_base_url}',
    description: 'Staging: the same paths as production, at another base address.',
    variables: {
      staging_base_url: {
        default: 'https://staging.petstore.example.net/v1',
        description: 'The staging base address, ending in the version segment `/v1`.',
      },
    },
  },
]

export const openapiDefinition = {
  openapi: '3.1.0',
  info: {
    title: 'Petstore',
    version: releaseVersion(),
    description,
    license: { name: 'MIT', identifier: 'MIT' },
  },
  servers,
  tags: [{ name: 'animals', description: 'The store’s animals.' }],
  components: {
    securitySchemes: {
      bearerAuth: {
        type: 'http' as const,
        scheme: 'bearer',
        description: 'An API key from `petstore keys create` or `PETSTORE_API_KEYS`.',
      },
    },
  },
  security: [{ bearerAuth: [] }],
}
