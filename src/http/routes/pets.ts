// The interface's three operations (listPets, createPet, getPet), each a schema and a handler.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { Clock } from '../../clock.ts'
import {
  GET_PET_DEPRECATED_AT,
  GET_PET_SUNSET_AT,
  IDEMPOTENCY_KEY_CHARACTERS,
  IDEMPOTENCY_KEY_MAX_LENGTH,
  LIST_LIMIT,
} from '../../contract/limits.ts'
import {
  commonErrorResponses,
  errorResponse,
  headers,
  jsonResponse,
} from '../../contract/responses.ts'
import { GetPetParams, ListPetsQuery, NewPet, Pet, Pets, ref } from '../../contract/schemas.ts'
import { ApiError } from '../../errors.ts'
import type { MaybePromise, Store } from '../../store/store.ts'
import type { Deprecation } from '../plugins/deprecation.ts'
import { documentedOnly } from '../validation.ts'
import { decodeCursor, nextPageLink } from './cursor.ts'
import { createClaim, readIdempotencyKey } from './idempotency.ts'
import { petJson, petsJson } from './pets-json.ts'

const JSON_CONTENT_TYPE = 'application/json; charset=utf-8'

/** getPet's deprecation (D7); exported for the benchmark's references, which send its headers. */
export const getPetDeprecation: Deprecation = {
  deprecatedAt: GET_PET_DEPRECATED_AT,
  sunsetAt: GET_PET_SUNSET_AT,
  docs: '/docs#/animals/getPet',
  successor: '/v1/pets',
}

export interface PetRoutesOptions {
  store: Store
  clock: Clock
  /** D14: how long an Idempotency-Key's record is replayed. */
  idempotencyTtlSeconds: number
}

/**
 * For the OpenAPI document only (documentedOnly: the validator compiler skips it): the handler
 * reads the field lines themselves and is the one judge of a key (routes/idempotency.ts). The
 * schema describes the plain form; its description says that the quoted form is accepted too.
 */
export const CreatePetHeaders = documentedOnly(
  Type.Object({
    'Idempotency-Key': Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: IDEMPOTENCY_KEY_MAX_LENGTH,
        pattern: IDEMPOTENCY_KEY_CHARACTERS.source,
        description: `Makes the create safe to retry (draft-ietf-httpapi-idempotency-key-header): 1–${IDEMPOTENCY_KEY_MAX_LENGTH} visible ASCII characters (0x21–0x7E), or that as a quoted string (\`"abc"\` is the key \`abc\`): the schema describes the plain form, and the quoted one is accepted too. A repeat with the same key and the same body from the same API key, within 24 hours, gets the first answer again (same status, body and \`Location\`, plus \`Idempotent-Replayed: true\`) and makes no second animal; the same key with another body is a 422 \`idempotency_key_reused\`; a repeat while the first is still being processed waits for it, or gets a 409 \`idempotency_key_in_use\`. Keys are scoped to the API key. Failures (4xx, 5xx) are not recorded, so a retry runs again.`,
      }),
    ),
  }),
)

export const petRoutes: FastifyPluginAsyncTypebox<PetRoutesOptions> = async (
  app,
  { store, clock, idempotencyTtlSeconds },
) => {
  const idempotencyTtlMs = idempotencyTtlSeconds * 1000

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
    // Not async: a page the store has at once is sent in this turn (sendNowOrLater).
    (request, reply) => {
      const { limit = LIST_LIMIT.default, status, cursor } = request.query
      const afterId = cursor === undefined ? 0 : decodeCursor(cursor)
      return sendNowOrLater(store.pets.list({ limit, status, afterId }), (page) => {
        const last = page.pets.at(-1)
        if (page.hasMore && last !== undefined) {
          reply.header('link', nextPageLink('/v1/pets', limit, status, last.id))
        }
        // The schema's bytes by JSON.stringify (routes/pets-json.ts: why not the schema's own
        // serializer). A reply with its own serializer gets no Content-Type from Fastify, hence
        // the type.
        reply.type(JSON_CONTENT_TYPE).serializer(petsJson).send(page.pets)
      })
    },
  )

  app.post(
    '/pets',
    {
      // One pet's body is always under the compression threshold (D26), so the plugin's hooks
      // are not attached at all; test/http/compression.test.ts checks the largest one.
      compress: false,
      schema: {
        operationId: 'createPet',
        tags: ['animals'],
        summary: 'Add an animal',
        description:
          'Adds an animal and returns it with its new `id`. The 201 is sent only once the animal is durably stored.',
        headers: CreatePetHeaders,
        body: ref(NewPet),
        response: {
          201: jsonResponse('Animal added; the body carries the assigned `id`.', ref(Pet), {
            Location: headers.location,
            'Idempotent-Replayed': headers.idempotentReplayed,
          }),
          400: errorResponse(['invalid_request']),
          409: errorResponse(['idempotency_key_in_use'], {
            'Retry-After': headers.retryAfterInUse,
          }),
          422: errorResponse(['idempotency_key_reused']),
          413: errorResponse(['payload_too_large']),
          415: errorResponse(['unsupported_media_type']),
          ...commonErrorResponses(),
        },
      },
    },
    async (request, reply) => {
      const key = readIdempotencyKey(
        request.headers['idempotency-key'],
        () => request.raw.headersDistinct['idempotency-key'],
      )
      if (key === undefined) {
        const pet = await store.pets.create(request.body)
        return reply.code(201).header('location', `/v1/pets/${pet.id}`).send(pet)
      }
      // D14: the pet and the answer to replay commit together; a repeat finds that answer.
      const claim = createClaim(request.body, {
        apiKeyId: request.apiKeyId,
        key,
        nowMs: clock.now(),
        ttlMs: idempotencyTtlMs,
      })
      // A key held by a request in flight rejects (IdempotencyKeyInUseError), answered 409 where
      // every store error is answered (plugins/errors.ts).
      const { created, found } = await store.pets.createIdempotent(request.body, claim)
      if (created !== undefined) {
        return reply.code(201).header('location', `/v1/pets/${created.id}`).send(created)
      }
      if (found.fingerprint !== claim.fingerprint) {
        throw new ApiError(
          'idempotency_key_reused',
          'this Idempotency-Key was already used by this API key with another request body; use a new key for a new request',
        )
      }
      return reply
        .code(found.status)
        .header('location', found.location)
        .header('idempotent-replayed', 'true')
        .send(JSON.parse(found.body))
    },
  )

  app.get(
    '/pets/:petId',
    {
      config: { deprecation: getPetDeprecation },
      compress: false, // as createPet's: one pet is always under the threshold
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
    (request, reply) => {
      const { petId } = request.params
      return sendNowOrLater(store.pets.get(petId), (pet) => {
        if (pet === undefined) throw new ApiError('not_found', `no pet with id ${petId}`)
        reply.type(JSON_CONTENT_TYPE).serializer(petJson).send(pet)
      })
    },
  )
}

/**
 * Sends what the store answered: at once when it answered at once (SQLite's reads), so that no
 * promise is made and no microtask waits for the answer; else once it is there. Returns the
 * promise Fastify waits on (a throw or rejection becomes the error answer), or nothing when sent.
 */
function sendNowOrLater<T>(
  answer: MaybePromise<T>,
  send: (value: T) => void,
): Promise<void> | undefined {
  if (answer instanceof Promise) return answer.then(send)
  send(answer)
  return undefined
}

const deprecationHeaderSpecs = {
  Deprecation: headers.deprecation,
  Sunset: headers.sunset,
  Link: headers.deprecationLink,
}
