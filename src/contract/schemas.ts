// The contract: one TypeBox definition per shape. These schemas validate requests, serialise
// responses, give the handlers their TypeScript types and become the OpenAPI document's
// components (see plugins/openapi.ts). Nothing else describes these shapes.
import { type Static, type TSchema, Type } from 'typebox'
import { errorCodes } from '../errors.ts'
import { LIST_LIMIT, MAX_ID, NAME_MAX_LENGTH } from './limits.ts'

/**
 * A `$ref` to a shared schema that keeps the referenced schema's static type, so handlers are
 * typed and the OpenAPI document shows one named component instead of a copy.
 */
export function ref<T extends TSchema>(schema: T) {
  const id = (schema as { $id?: unknown }).$id
  if (typeof id !== 'string') throw new Error('ref() needs a schema with an $id')
  return Type.Unsafe<Static<T>>(Type.Ref(id))
}

function int64Id(description: string) {
  return Type.Integer({ format: 'int64', minimum: 1, maximum: MAX_ID, description })
}

export const PetStatus = Type.Enum(['available', 'pending', 'sold'], {
  $id: 'PetStatus',
  type: 'string',
  description: 'Availability status of the animal.',
})

const petFields = {
  name: Type.String({
    minLength: 1,
    maxLength: NAME_MAX_LENGTH,
    // At least one non-space character; no control characters and no lone UTF-16 surrogates
    // (they cannot be stored as UTF-8, so they could not round-trip exactly).
    pattern: '^(?!\\s*$)[^\\p{Cc}\\p{Cs}]+$',
    description: `The animal's name: 1 to ${NAME_MAX_LENGTH} characters (Unicode code points), at least one of them not white space, no control characters. Stored and returned exactly as sent.`,
  }),
  categoryId: int64Id(
    `Identifier of the category the animal belongs to, from 1 to ${MAX_ID} (2^53 − 1), written as a JSON integer (no fraction, no exponent).`,
  ),
  status: Type.Optional(ref(PetStatus)),
}

/** The animals the reference shows (JSON Schema `examples`), rather than ones made up from the rules. */
const rex = { name: 'Rex', categoryId: 1, status: 'available' } as const
const whiskers = { name: 'Whiskers', categoryId: 2, status: 'pending' } as const

export const NewPet = Type.Object(petFields, {
  $id: 'NewPet',
  additionalProperties: false,
  description:
    'An animal to add. Exactly these fields: any other field, `id` included, is refused, and the 400 names every one. `status` has no default: when omitted it stays omitted.',
  examples: [rex],
})

export const Pet = Type.Object(
  { id: int64Id('Unique identifier, assigned by the service on creation.'), ...petFields },
  {
    $id: 'Pet',
    additionalProperties: false,
    description: 'An animal.',
    examples: [{ id: 1, ...rex }],
  },
)

export const Pets = Type.Array(ref(Pet), {
  $id: 'Pets',
  description: 'A page of animals in ascending `id` order.',
  examples: [
    [
      { id: 1, ...rex },
      { id: 2, ...whiskers },
    ],
  ],
})

export const ErrorBodySchema = Type.Object(
  {
    code: Type.Enum(errorCodes, { type: 'string', description: 'Machine-readable error code.' }),
    message: Type.String({
      description: 'Human-readable description; names the offending field and rule.',
    }),
    status: Type.Integer({
      minimum: 400,
      maximum: 599,
      description: 'The HTTP status code of the response.',
    }),
  },
  { $id: 'Error', additionalProperties: false, description: 'The body of every error response.' },
)

export const ListPetsQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.Integer({
        ...LIST_LIMIT,
        description: 'Maximum number of animals returned.',
      }),
    ),
    status: Type.Optional(ref(PetStatus)),
    cursor: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        description:
          'Where the page starts: the `cursor` of the previous page\'s `Link: <…>; rel="next"` header (e.g. `</v1/pets?limit=20&cursor=eyJhZnRlciI6MjB9>; rel="next"` gives `eyJhZnRlciI6MjB9`), sent with the same `limit` and `status`. Opaque: never build one; following the link as it is sends it for you.',
        examples: ['eyJhZnRlciI6MjB9'],
      }),
    ),
  },
  { additionalProperties: false },
)

export const GetPetParams = Type.Object(
  { petId: int64Id('Identifier of the animal to retrieve.') },
  { additionalProperties: false },
)

/** Shared schemas, registered once with Fastify; routes refer to them with `ref()`. */
export const sharedSchemas = [PetStatus, NewPet, Pet, Pets, ErrorBodySchema]

export type PetStatus = Static<typeof PetStatus>
export type NewPet = Static<typeof NewPet>
export type Pet = Static<typeof Pet>
export type ListPetsQuery = Static<typeof ListPetsQuery>
