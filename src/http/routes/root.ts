// D1: `GET /` answers where to go next, for a person or a tool that starts at the root: the
// reference page, the OpenAPI document and the liveness probe. Like them it needs no key, and it
// says nothing about the data (no pets, no counts, no version), so it tells a caller without a
// key no more than the open paths it names. It is infrastructure, not an operation: untagged,
// so it stays out of the OpenAPI document with /healthz and /readyz (plugins/openapi.ts).
import type { FastifyPluginAsync } from 'fastify'
import { openapiDefinition } from '../../contract/openapi.ts'
import { DOCS_PREFIX } from '../plugins/docs-page.ts'
import { OPENAPI_PATH } from '../plugins/openapi.ts'
import { LIVENESS_PATH } from './health.ts'

/** The root document: the same for every request, so built once. */
export const ROOT_DOCUMENT = Object.freeze({
  name: openapiDefinition.info.title,
  docs: DOCS_PREFIX,
  openapi: OPENAPI_PATH,
  health: LIVENESS_PATH,
})

export const rootRoutes: FastifyPluginAsync = async (app) => {
  app.get('/', async () => ROOT_DOCUMENT)
}
