// petstore-client: the typed client for the Petstore HTTP API.
export type { ErrorBody, ErrorCode, NewPet, Pet, PetStatus } from './contract.ts'
export { GET_PET_SUNSET } from './contract.ts'
export {
  type ClientErrorCode,
  PetstoreError,
  type PetstoreErrorCode,
  type RateLimit,
} from './errors.ts'
export {
  type CallOptions,
  type CreateOptions,
  type ListPageParams,
  type ListPetsParams,
  type PetPage,
  type Pets,
  Petstore,
  type PetstoreOptions,
  type PetsWithResponse,
} from './petstore.ts'
export type { RateLimitBudget, ResponseInfo, WithResponse } from './response.ts'
export type { Sleep } from './retry.ts'
export type { Fetch } from './transport.ts'
