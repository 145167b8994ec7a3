// D23: how finished spans leave the process. A batch span processor with a bounded queue sends
// them to the OTLP/HTTP exporter; around it, what an operator needs to trust it:
//
// - nothing a client sent as a credential reaches an attribute (url.path, url.query, url.full
//   are redacted as the log's URL is, before the span ends);
// - a collector that is down or slow is said once in the log, and once when it takes spans
//   again, not on every batch;
// - a full queue (the collector slower than the spans come) drops new spans, said once, and
//   said again with the count when there is room; memory stays bounded by the queue.
//
// The batch processor keeps its queue and its drops to itself, so the queue's length is counted
// here from its two public sides: the spans it is given, and the spans it hands the exporter
// (it takes them off its queue as it hands them over).
import type { Attributes } from '@opentelemetry/api'
import { TraceFlags } from '@opentelemetry/api'
import { type ExportResult, ExportResultCode } from '@opentelemetry/core'
import {
  BatchSpanProcessor,
  type ReadableSpan,
  type Span,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace'
import type { TracingConfig } from '../../config.ts'
import { loggableEndpoint } from '../../printable.ts'
import { redactQuery, redactUrl } from '../logging.ts'
import type { TracingLog } from './installed.ts'

/** The OTLP specification's default queue (OTEL_BSP_MAX_QUEUE_SIZE): about 2 MB of spans. */
export const MAX_QUEUE_SIZE = 2048

/** The attributes that carry a URL or part of one (HTTP semantic conventions). */
const URL_ATTRIBUTES = ['url.path', 'url.query', 'url.full'] as const

/** Redacts credentials from URL attributes, as the log does (observability/logging.ts). */
export function redactUrlAttributes(attributes: Attributes): Attributes {
  const redacted: Attributes = {}
  for (const name of URL_ATTRIBUTES) {
    const value = attributes[name]
    if (typeof value !== 'string') continue
    // url.query is the query alone, without its `?`.
    const clean = name === 'url.query' ? redactQuery(value) : redactUrl(value)
    if (clean !== value) redacted[name] = clean
  }
  return redacted
}

/** Logs go here until the app's logger is attached: start-up has none yet. */
class HeldLog implements TracingLog {
  #target: TracingLog | undefined
  #held: Array<[level: 'info' | 'warn', fields: object, message: string]> = []

  attach(target: TracingLog): void {
    this.#target = target
    for (const [level, fields, message] of this.#held.splice(0)) target[level](fields, message)
  }

  info(fields: object, message: string): void {
    this.#write('info', fields, message)
  }

  warn(fields: object, message: string): void {
    this.#write('warn', fields, message)
  }

  #write(level: 'info' | 'warn', fields: object, message: string): void {
    if (this.#target !== undefined) this.#target[level](fields, message)
    else if (this.#held.length < 20) this.#held.push([level, fields, message])
  }
}

/** The exporter, watched: counts what it is handed, logs an outage once and its end once. */
class WatchedExporter implements SpanExporter {
  readonly #exporter: SpanExporter
  readonly #log: TracingLog
  /** As logged: without credentials (loggableEndpoint). */
  readonly #endpoint: string
  handed = 0
  #failedBatches = 0

  constructor(exporter: SpanExporter, log: TracingLog, endpoint: string) {
    this.#exporter = exporter
    this.#log = log
    this.#endpoint = endpoint
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.handed += spans.length
    this.#exporter.export(spans, (result) => {
      this.#observe(result, spans.length)
      done(result)
    })
  }

  #observe(result: ExportResult, count: number): void {
    if (result.code === ExportResultCode.SUCCESS) {
      if (this.#failedBatches > 0) {
        this.#log.info(
          { endpoint: this.#endpoint, failedBatches: this.#failedBatches },
          'tracing: spans are exported again',
        )
      }
      this.#failedBatches = 0
      return
    }
    if (this.#failedBatches === 0) {
      this.#log.warn(
        { endpoint: this.#endpoint, spans: count, error: result.error?.message },
        'tracing: spans cannot be exported; they are dropped until the collector takes them again (said once)',
      )
    }
    this.#failedBatches++
  }

  forceFlush(): Promise<void> {
    return this.#exporter.forceFlush?.() ?? Promise.resolve()
  }

  shutdown(): Promise<void> {
    return this.#exporter.shutdown()
  }
}

/** The batch processor with its queue watched and URL attributes redacted. */
class WatchedBatch implements SpanProcessor {
  readonly #batch: BatchSpanProcessor
  readonly #exporter: WatchedExporter
  readonly #log: TracingLog
  #queued = 0
  #dropped = 0

  constructor(exporter: WatchedExporter, log: TracingLog, scheduleDelayMs: number) {
    this.#exporter = exporter
    this.#log = log
    this.#batch = new BatchSpanProcessor({
      exporter,
      maxQueueSize: MAX_QUEUE_SIZE,
      scheduledDelayMillis: scheduleDelayMs,
    })
  }

  onStart(span: Span, parentContext: Parameters<SpanProcessor['onStart']>[1]): void {
    this.#batch.onStart(span, parentContext)
  }

  onEnding(span: Span): void {
    const redacted = redactUrlAttributes(span.attributes)
    for (const name in redacted) span.setAttribute(name, redacted[name] as string)
  }

  onEnd(span: ReadableSpan): void {
    if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) !== 0) this.#count()
    this.#batch.onEnd(span)
  }

  /** What the batch processor will do with one more sampled span: queue it or drop it. */
  #count(): void {
    const inQueue = this.#queued - this.#exporter.handed
    if (inQueue >= MAX_QUEUE_SIZE) {
      if (this.#dropped === 0) {
        this.#log.warn(
          { queue: MAX_QUEUE_SIZE },
          'tracing: the span queue is full, new spans are dropped until the collector takes the queued ones (said once)',
        )
      }
      this.#dropped++
      return
    }
    if (this.#dropped > 0) {
      this.#log.info({ dropped: this.#dropped }, 'tracing: spans are queued again')
      this.#dropped = 0
    }
    this.#queued++
  }

  forceFlush(): Promise<void> {
    return this.#batch.forceFlush()
  }

  shutdown(): Promise<void> {
    return this.#batch.shutdown()
  }
}

export interface Pipeline {
  processor: SpanProcessor
  log: HeldLog
}

/** The span processor that sends `exporter`'s spans to `endpoint`, and where it logs it. */
export function exportPipeline(
  exporter: SpanExporter,
  settings: Pick<TracingConfig, 'endpoint' | 'scheduleDelayMs'>,
): Pipeline {
  const log = new HeldLog()
  const watched = new WatchedExporter(exporter, log, loggableEndpoint(settings.endpoint))
  return { processor: new WatchedBatch(watched, log, settings.scheduleDelayMs), log }
}
