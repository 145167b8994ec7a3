// An OTLP/HTTP trace receiver for tests (D23): node:http on 127.0.0.1, POST /v1/traces, as an
// OpenTelemetry Collector takes them. JSON requests (http/json) are decoded into spans; protobuf
// ones (http/protobuf) are kept as bytes. `answer` chooses how it replies: at once, or never
// (a collector that hangs).
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

type AnyValue = {
  stringValue?: string
  intValue?: number | string
  boolValue?: boolean
  doubleValue?: number
}
type KeyValue = { key: string; value: AnyValue }

/** A span as OTLP/JSON carries it, with its resource's and scope's names beside it. */
export interface ReceivedSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  kind: number
  attributes: Record<string, string | number | boolean>
  links: { traceId: string; spanId: string }[]
  status: { code?: number; message?: string }
  events?: { name: string }[]
  scope: string
  resource: Record<string, string | number | boolean>
}

export interface ProtobufRequest {
  contentType: string
  body: Buffer
}

function plainValue(value: AnyValue): string | number | boolean {
  if (value.stringValue !== undefined) return value.stringValue
  if (value.intValue !== undefined) return Number(value.intValue)
  if (value.doubleValue !== undefined) return value.doubleValue
  if (value.boolValue !== undefined) return value.boolValue
  return JSON.stringify(value)
}

function record(list: KeyValue[] | undefined): Record<string, string | number | boolean> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, plainValue(value)]))
}

interface OtlpJson {
  resourceSpans: {
    resource?: { attributes?: KeyValue[] }
    scopeSpans: {
      scope?: { name?: string }
      spans: (Omit<ReceivedSpan, 'attributes' | 'scope' | 'resource' | 'links'> & {
        attributes?: KeyValue[]
        links?: { traceId: string; spanId: string }[]
      })[]
    }[]
  }[]
}

function spansOf(body: OtlpJson): ReceivedSpan[] {
  return body.resourceSpans.flatMap((resourceSpans) =>
    resourceSpans.scopeSpans.flatMap((scopeSpans) =>
      scopeSpans.spans.map((span) => ({
        ...span,
        attributes: record(span.attributes),
        links: (span.links ?? []).map(({ traceId, spanId }) => ({ traceId, spanId })),
        status: span.status ?? {},
        scope: scopeSpans.scope?.name ?? '',
        resource: record(resourceSpans.resource?.attributes),
      })),
    ),
  )
}

export interface OtlpReceiver {
  /** The base URL, for OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string
  spans: ReceivedSpan[]
  protobuf: ProtobufRequest[]
  /** Every request that reached /v1/traces, answered or not. */
  requests: number
  /** Resolves once `predicate` holds of the spans received, or rejects after `timeoutMs`. */
  waitFor(predicate: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<void>
  close(): Promise<void>
}

export async function startOtlpReceiver(
  options: { answer?: 'at once' | 'never' } = {},
): Promise<OtlpReceiver> {
  const hanging: ServerResponse[] = []
  const receiver: OtlpReceiver = {
    url: '',
    spans: [],
    protobuf: [],
    requests: 0,
    async waitFor(predicate, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs
      while (!predicate(receiver.spans)) {
        if (Date.now() > deadline) {
          throw new Error(`spans not received in ${timeoutMs} ms; have ${describe(receiver.spans)}`)
        }
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    },
    async close() {
      for (const response of hanging) response.destroy()
      server.closeAllConnections()
      server.close()
    },
  }
  const server = createServer(async (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = []
    for await (const chunk of request) chunks.push(chunk as Buffer)
    if (request.method !== 'POST' || request.url !== '/v1/traces') {
      response.writeHead(404).end()
      return
    }
    receiver.requests++
    const body = Buffer.concat(chunks)
    const contentType = request.headers['content-type'] ?? ''
    if (options.answer === 'never') {
      hanging.push(response)
      return
    }
    if (contentType.startsWith('application/json')) {
      receiver.spans.push(...spansOf(JSON.parse(body.toString('utf8')) as OtlpJson))
    } else {
      receiver.protobuf.push({ contentType, body })
    }
    response
      .writeHead(200, { 'content-type': contentType })
      .end(contentType.startsWith('application/json') ? '{}' : '')
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return receiver
}

function describe(spans: ReceivedSpan[]): string {
  return spans.length === 0 ? 'none' : spans.map((span) => span.name).join(', ')
}

/** The spans of one trace. */
export function traceOf(spans: ReceivedSpan[], traceId: string): ReceivedSpan[] {
  return spans.filter((span) => span.traceId === traceId)
}

/** The server span of a request (instrumentation-http's, kind server). */
export function serverSpans(spans: ReceivedSpan[]): ReceivedSpan[] {
  return spans.filter((span) => span.kind === 2)
}

/** A new trace as a caller starts it: its W3C traceparent, sampled unless told. */
export function callerContext(sampled = true) {
  const traceId = randomBytes(16).toString('hex')
  const parentId = randomBytes(8).toString('hex')
  return { traceId, parentId, traceparent: `00-${traceId}-${parentId}-${sampled ? '01' : '00'}` }
}

/** One create at `baseUrl` in a new sampled trace: the trace and the answer's status. */
export async function tracedCreate(baseUrl: string, key: string, name: string) {
  const caller = callerContext()
  const response = await fetch(`${baseUrl}/v1/pets`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      traceparent: caller.traceparent,
    },
    body: JSON.stringify({ name, categoryId: 1 }),
  })
  await response.arrayBuffer()
  return { ...caller, status: response.status }
}
