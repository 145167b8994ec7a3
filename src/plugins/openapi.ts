// The published contract: OpenAPI 3.1 at /v1/openapi.json, generated from the same schemas that
// validate requests, and an interactive reference at /docs served from local assets (no CDN).
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import fp from 'fastify-plugin'
import { openapiDefinition } from '../contract/openapi.ts'

export const openapi = fp(async (app) => {
  await app.register(swagger, {
    openapi: openapiDefinition,
    // Only the tagged API operations; health, docs and 405 routes are not part of the API.
    hideUntagged: true,
    // Shared schemas become components named by their $id (Pet, NewPet, Error, …).
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`),
    },
  })
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    // Every asset is local. Unlike swagger-ui's default CSP (`staticCSP: true`), no
    // `upgrade-insecure-requests`: over plain HTTP on any host but localhost it turned the
    // assets' URLs into https ones, and the page stayed blank.
    staticCSP: {
      'default-src': ["'self'"],
      'base-uri': ["'self'"],
      'font-src': ["'self'", 'data:'],
      'frame-ancestors': ["'self'"],
      'img-src': ["'self'", 'data:'],
      'object-src': ["'none'"],
      'script-src': ["'self'"],
      'script-src-attr': ["'none'"],
      'style-src': ["'self'"],
    },
    uiConfig: { deepLinking: true, defaultModelsExpandDepth: 1 },
  })
  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger())
})
