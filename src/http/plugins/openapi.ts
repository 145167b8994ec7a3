// The published contract: OpenAPI 3.1 at /v1/openapi.json, generated from the same schemas that
// validate requests (contract/), and the interactive reference at /docs (plugins/docs-page.ts).
import swagger from '@fastify/swagger'
import fp from 'fastify-plugin'
import { referenceComponents } from '../../contract/components.ts'
import { openapiDefinition } from '../../contract/openapi.ts'
import { withPreferParameter } from '../../contract/prefer.ts'
import {
  DOCUMENT_CACHE_CONTROL,
  type FixedBody,
  fixedBody,
  sendFixedBody,
} from '../conditional-get.ts'
import { docsPage } from './docs-page.ts'

/** Where the document is served (D1); `/docs/json` serves the same bytes for the page. */
export const OPENAPI_PATH = '/v1/openapi.json'

export const openapi = fp(async (app) => {
  await app.register(swagger, {
    openapi: openapiDefinition,
    // Only the tagged API operations; health, docs and 405 routes are not part of the API.
    hideUntagged: true,
    // Shared schemas become components named by their $id (Pet, NewPet, Error, …).
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`),
    },
    // Each header always sent, error example and error response written once, under
    // components; every operation's staging-only Prefer parameter (contract/prefer.ts).
    // The document is OpenAPI 3.1 (openapiDefinition), so it is always `openapiObject`.
    transformObject: (document) =>
      withPreferParameter(
        referenceComponents('openapiObject' in document ? document.openapiObject : {}),
      ),
  })
  // Built on first use: app.swagger() needs every route in. The same bytes and ETag on each
  // answer, here and at /docs/json.
  let document: FixedBody | undefined
  const currentDocument = () => {
    document ??= fixedBody(JSON.stringify(app.swagger()))
    return document
  }
  app.get(OPENAPI_PATH, { schema: { hide: true } }, (request, reply) =>
    sendFixedBody(
      request,
      reply,
      currentDocument(),
      'application/json; charset=utf-8',
      DOCUMENT_CACHE_CONTROL,
    ),
  )
  await app.register(docsPage, { document: currentDocument })
})
