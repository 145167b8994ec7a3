// The interface's three operations (listPets, createPet, getPet), each a schema and a handler.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { GET_PET_DEPRECATED_AT, GET_PET_SUNSET_AT, LIST_LIMIT } from '../contract/limits.ts'
import {
  commonErrorResponses,
  errorResponse,
  headers,
  jsonResponse,
} from '../contract/responses.ts'
import { GetPetParams, ListPetsQuery, NewPet, Pet, Pets, ref } from '../contract/schemas.ts'
import { ApiError } from '../errors.ts'
import type { Deprecation } from '../plugins/deprecation.ts'
import type { Store } from '../store/store.ts'
import { decodeCursor, nextPageLink } from './cursor.ts'

const getPetDeprecation: Deprecation = {
  deprecatedAt: GET_PET_DEPRECATED_AT,
  sunsetAt: GET_PET_SUNSET_AT,
  docs: '/docs#/animals/getPet',
  successor: '/v1/pets',
}

export const petRoutes: FastifyPluginAsyncTypebox<{ store: Store }> = async (app, { store }) => {
  app.get(
    '/pets',
    {
      schema: {
        operationId: 'listPets',
        tags: ['animals'],
        summary: 'List all animals',
        description:
          'Returns a page of animals in ascending `id` order, optionally only those with one `status`. When more follow, `Link: <…>; rel="next"` carries the URL of the next page.',
        querystring: ListPetsQuery,
        response: {
          200: jsonResponse('A page of animals (possibly empty).', ref(Pets), {
            Link: headers.link,
          }),
          400: errorResponse(['invalid_request']),
          ...commonErrorResponses(),
        },
      },
    },
    async (request, reply) => {
      const { limit = LIST_LIMIT.default, status, cursor } = request.query
      const afterId = cursor === undefined ? 0 : decodeCursor(cursor)
      const page = await store.pets.list({ limit, status, afterId })
      const last = page.pets.at(-1)
      if (page.hasMore && last !== undefined) {
        reply.header('link', nextPageLink('/v1/pets', limit, status, last.id))
      }
      return page.pets
    },
  )

  app.post(
    '/pets',
    {
      schema: {
        operationId: 'createPet',
        tags: ['animals'],
        summary: 'Add an animal',
        description:
          'Adds an animal and returns it with its new `id`. The 201 is sent only once the animal is durably stored.',
        body: ref(NewPet),
        response: {
          201: jsonResponse('Animal added; the body carries the assigned `id`.', ref(Pet), {
            Location: headers.location,
          }),
          400: errorResponse(['invalid_request']),
          413: errorResponse(['payload_too_large']),
          415: errorResponse(['unsupported_media_type']),
          ...commonErrorResponses(),
        },
      },
    },
    async (request, reply) => {
      const pet = await store.pets.create(request.body)
      return reply.code(201).header('location', `/v1/pets/${pet.id}`).send(pet)
    },
  )

  app.get(
    '/pets/:petId',
    {
      config: { deprecation: getPetDeprecation },
      schema: {
        operationId: 'getPet',
        tags: ['animals'],
        summary: 'Get an animal (deprecated)',
        description: `Deprecated: removed on ${GET_PET_SUNSET_AT.toUTCString()}, after which it answers 410. Use \`GET /pets\` with the \`status\` filter instead.`,
        deprecated: true,
        params: GetPetParams,
        response: {
          200: jsonResponse('The animal.', ref(Pet), deprecationHeaderSpecs),
          400: errorResponse(['invalid_request'], deprecationHeaderSpecs),
          404: errorResponse(['not_found'], deprecationHeaderSpecs),
          410: errorResponse(['gone'], deprecationHeaderSpecs),
          ...commonErrorResponses(deprecationHeaderSpecs),
        },
      },
    },
    async (request) => {
      const pet = await store.pets.get(request.params.petId)
      if (pet === undefined) {
        throw new ApiError('not_found', `no pet with id ${request.params.petId}`)
      }
      return pet
    },
  )
}

const deprecationHeaderSpecs = {
  Deprecation: headers.deprecation,
  Sunset: headers.sunset,
  Link: headers.deprecationLink,
}
