// Issue 46's credentials in URLs, for the tests that show they never reach a span or the log
// (test/redaction.test.ts, on the functions; test/tracing-redaction.test.ts, through a service).
import { generateApiKey } from '../../src/contract/api-key.ts'

/** A key's body (never valid anywhere), as a client that percent-encodes the underscores sends it. */
export const KEY_BODY = generateApiKey('production').slice('petstore_live_'.length)
/** Credentials under names a deny-list would miss. */
export const SECRETS = [
  's1-api-key-0123456789',
  's2-access-token-0123',
  's3-x-api-key-0123',
  's4-foo',
]

/** Each request target, and its url.path and url.query as a span must have them. */
export const CREDENTIAL_URLS: [target: string, path: string, query: string | undefined][] = [
  [`/v1/pets?api-key=${SECRETS[0]}`, '/v1/pets', 'api-key=[redacted]'],
  [`/v1/pets?access-token=${SECRETS[1]}`, '/v1/pets', 'access-token=[redacted]'],
  [`/v1/pets?x-api-key=${SECRETS[2]}`, '/v1/pets', 'x-api-key=[redacted]'],
  [`/v1/pets?limit=5&foo=${SECRETS[3]}`, '/v1/pets', 'limit=5&foo=[redacted]'],
  [`/v1/pets/petstore%5Flive%5F${KEY_BODY}`, '/v1/pets/[redacted]', undefined],
  [`/v1/pets?cursor=petstore%5Flive%5F${KEY_BODY}`, '/v1/pets', 'cursor=[redacted]'],
]
