// D16, D23: a credential a client put in the URL reaches no span, seen from outside: the real
// `petstore serve` exporting to an OTLP/HTTP receiver the test starts. The cases of issue 46:
// query parameters outside the allow-list, and a key of ours percent-encoded in the path or
// query. The rules themselves are test/redaction.test.ts's; this shows the spans get them.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { generateApiKey } from '../src/contract/api-key.ts'
import { type OtlpReceiver, serverSpans, startOtlpReceiver } from './helpers/otlp-receiver.ts'
import { type ServiceProcess, startService } from './helpers/process.ts'
import { tempDir } from './helpers/server.ts'

const KEY = generateApiKey('production')
/** A second key, never valid here, sent percent-encoded where a client might paste one. */
const BODY = generateApiKey('production').slice('petstore_live_'.length)
const SECRETS = ['s1-api-key-0123456789', 's2-access-token-0123', 's3-x-api-key-0123', 's4-foo']

/** Each request as sent, and its server span's url.path and url.query as they must arrive. */
const CASES: [sent: string, path: string, query: string | undefined][] = [
  [`/v1/pets?api-key=${SECRETS[0]}`, '/v1/pets', 'api-key=[redacted]'],
  [`/v1/pets?access-token=${SECRETS[1]}`, '/v1/pets', 'access-token=[redacted]'],
  [`/v1/pets?x-api-key=${SECRETS[2]}`, '/v1/pets', 'x-api-key=[redacted]'],
  [`/v1/pets?limit=5&foo=${SECRETS[3]}`, '/v1/pets', 'limit=5&foo=[redacted]'],
  [`/v1/pets/petstore%5Flive%5F${BODY}`, '/v1/pets/[redacted]', undefined],
  [`/v1/pets?cursor=petstore%5Flive%5F${BODY}`, '/v1/pets', 'cursor=[redacted]'],
]

let receiver: OtlpReceiver
let service: ServiceProcess
let dir: { path: string; remove(): Promise<void> }

before(async () => {
  receiver = await startOtlpReceiver()
  dir = await tempDir()
  service = await startService({
    PETSTORE_API_KEYS: KEY,
    DATABASE_URL: `sqlite:${join(dir.path, 'petstore.db')}`,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_TRACES_SAMPLER: 'always_on',
    OTEL_BSP_SCHEDULE_DELAY: '100',
  })
  // The only requests traced: one server span each (probes are not traced), matched below by
  // their URL attributes rather than by a caller's traceparent, which is followed only from a
  // trusted peer.
  for (const [sent] of CASES) {
    const response = await fetch(service.url + sent, {
      headers: { authorization: `Bearer ${KEY}` },
    })
    await response.body?.cancel()
  }
  await receiver.waitFor((spans) => serverSpans(spans).length === CASES.length)
})
after(async () => {
  await service?.stop()
  await receiver?.close()
  await dir?.remove()
})

test('no credential of issue 46 reaches a span, nor the log', () => {
  const exported = JSON.stringify(receiver.spans)
  const logged = service.stdout()
  for (const secret of [...SECRETS, BODY]) {
    assert.ok(!exported.includes(secret), `${secret} is in a span`)
    assert.ok(!logged.includes(secret), `${secret} is in the log`)
  }
})

test("each request's server span has its URL redacted, the rest as sent", () => {
  const urlOf = (path: unknown, query: unknown) => (query === undefined ? path : `${path}?${query}`)
  const received = serverSpans(receiver.spans).map(({ attributes }) =>
    urlOf(attributes['url.path'], attributes['url.query']),
  )
  const expected = CASES.map(([, path, query]) => urlOf(path, query))
  assert.deepEqual(received.sort(), expected.sort())
})
