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
import { CREDENTIAL_URLS, KEY_BODY, SECRETS } from './helpers/url-credentials.ts'

const KEY = generateApiKey('production')

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
  for (const [sent] of CREDENTIAL_URLS) {
    const response = await fetch(service.url + sent, {
      headers: { authorization: `Bearer ${KEY}` },
    })
    await response.body?.cancel()
  }
  await receiver.waitFor((spans) => serverSpans(spans).length === CREDENTIAL_URLS.length)
})
after(async () => {
  await service?.stop()
  await receiver?.close()
  await dir?.remove()
})

test('no credential of issue 46 reaches a span, nor the log', () => {
  const exported = JSON.stringify(receiver.spans)
  const logged = service.stdout()
  for (const secret of [...SECRETS, KEY_BODY]) {
    assert.ok(!exported.includes(secret), `${secret} is in a span`)
    assert.ok(!logged.includes(secret), `${secret} is in the log`)
  }
})

test("each request's server span has its URL redacted, the rest as sent", () => {
  const urlOf = (path: unknown, query: unknown) => (query === undefined ? path : `${path}?${query}`)
  const received = serverSpans(receiver.spans).map(({ attributes }) =>
    urlOf(attributes['url.path'], attributes['url.query']),
  )
  const expected = CREDENTIAL_URLS.map(([, path, query]) => urlOf(path, query))
  assert.deepEqual(received.sort(), expected.sort())
})
