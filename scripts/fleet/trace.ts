// One create through the whole fleet, traced (D23): a sampled W3C traceparent sent to HAProxy,
// which passes it on; the instance's spans, its worker's queries through PgBouncer and its Redis
// calls, collected by an OTLP/HTTP receiver the harness runs, as a tree for docs/fleet-report.md.
import type { OtlpReceiver, ReceivedSpan } from '../../test/helpers/otlp-receiver.ts'
import { tracedCreate, traceOf } from '../../test/helpers/otlp-receiver.ts'

export interface TracedSpan {
  depth: number
  name: string
  /** Where a client span went: `server.address:server.port`, as the instrumentation says. */
  peer: string | undefined
  durationMs: number
}

export interface TraceReport {
  traceId: string
  /** The caller's span is the server span's parent: HAProxy passed the traceparent on. */
  continued: boolean
  spans: TracedSpan[]
}

type WithTimes = ReceivedSpan & { startTimeUnixNano?: string; endTimeUnixNano?: string }

function durationMs(span: WithTimes): number {
  const start = BigInt(span.startTimeUnixNano ?? '0')
  const end = BigInt(span.endTimeUnixNano ?? '0')
  return Number(end - start) / 1e6
}

function peerOf(span: ReceivedSpan): string | undefined {
  const host = span.attributes['server.address'] ?? span.attributes['net.peer.name']
  const port = span.attributes['server.port'] ?? span.attributes['net.peer.port']
  return span.kind === 3 && host !== undefined ? `${host}:${port ?? ''}` : undefined
}

/** The spans as a tree in start order, from the server span down. */
function tree(spans: WithTimes[], rootParent: string): TracedSpan[] {
  const ordered = [...spans].sort((a, b) =>
    BigInt(a.startTimeUnixNano ?? '0') < BigInt(b.startTimeUnixNano ?? '0') ? -1 : 1,
  )
  const out: TracedSpan[] = []
  const walk = (parent: string, depth: number) => {
    for (const span of ordered.filter((each) => each.parentSpanId === parent)) {
      out.push({ depth, name: span.name, peer: peerOf(span), durationMs: durationMs(span) })
      walk(span.spanId, depth + 1)
    }
  }
  walk(rootParent, 0)
  return out
}

/** Sends one create through `baseUrl` with a sampled traceparent, and collects its trace. */
export async function traceOneCreate(
  baseUrl: string,
  key: string,
  receiver: OtlpReceiver,
): Promise<TraceReport> {
  const { traceId, parentId, status } = await tracedCreate(baseUrl, key, 'traced create')
  if (status !== 201) throw new Error(`the traced create got ${status}`)
  await receiver.waitFor((spans) =>
    traceOf(spans, traceId).some((span) => span.scope === '@opentelemetry/instrumentation-pg'),
  )
  // The rest of the batch may come a moment later.
  await new Promise((resolve) => setTimeout(resolve, 1_000))
  const spans = traceOf(receiver.spans, traceId) as WithTimes[]
  return {
    traceId,
    continued: spans.some((span) => span.kind === 2 && span.parentSpanId === parentId),
    spans: tree(spans, parentId),
  }
}
