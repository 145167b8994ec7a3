// D23: tracing, started before anything it traces is loaded. bin/petstore.js imports this module
// only for `serve` with an OTLP endpoint set (config.ts, tracingWanted); without one, nothing of
// OpenTelemetry is loaded at all. It builds the tracer provider from the standard OTEL_
// variables (config.ts checks them), turns on the instrumentations of Fastify, pg and ioredis,
// and installs what the instance puts in place (installed.ts). Not @opentelemetry/
// instrumentation-http: it binds every request and response to the context, which costs each
// request far more than its span, sampled or not (D23, docs/benchmarks.md "Tracing");
// @fastify/otel makes the server span. A caller's trace context is followed only from a trusted
// peer (caller-context.ts).
import './module-hooks.ts'
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { FastifyOtelInstrumentation } from '@fastify/otel'
import { context, DiagLogLevel, diag, propagation, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { setGlobalErrorHandler, W3CTraceContextPropagator } from '@opentelemetry/core'
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { registerInstrumentations } from '@opentelemetry/instrumentation'
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis'
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg'
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources'
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace'
import { type Config, configDefaults, type TracingConfig } from '../../config.ts'
import { loggableEndpoint } from '../../printable.ts'
import { followingTrustedPeers, TrustedPeerPropagator, trustedPeers } from './caller-context.ts'
import { installTracing, type Tracing } from './installed.ts'
import { exportPipeline } from './pipeline.ts'
import { tracedSqliteStore } from './sqlite-spans.ts'

/** Shutdown waits this long at most for the last spans to leave (within D11's drain). */
export const FLUSH_TIMEOUT_MS = 2_000

/** The sampler OTEL_TRACES_SAMPLER names, with OTEL_TRACES_SAMPLER_ARG's ratio. */
export function samplerOf(config: Pick<TracingConfig, 'sampler' | 'samplerRatio'>): Sampler {
  const ratio = new TraceIdRatioBasedSampler(config.samplerRatio)
  switch (config.sampler) {
    case 'always_on':
      return new AlwaysOnSampler()
    case 'always_off':
      return new AlwaysOffSampler()
    case 'traceidratio':
      return ratio
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() })
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio })
  }
}

function packageVersion(): string {
  const text = readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')
  return (JSON.parse(text) as { version: string }).version
}

/**
 * Ours first; OTEL_RESOURCE_ATTRIBUTES, then OTEL_SERVICE_NAME, override them (the resource
 * detector reads both, as the specification says).
 */
function resourceOf(config: Pick<Config, 'env'>, version: string) {
  return resourceFromAttributes({
    'service.name': configDefaults.OTEL_SERVICE_NAME,
    'service.version': version,
    'deployment.environment.name': config.env,
    'service.instance.id': randomUUID(),
  }).merge(detectResources({ detectors: [envDetector] }))
}

function exporterOf(config: TracingConfig) {
  // Each reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS, _TIMEOUT and _COMPRESSION itself.
  return config.protocol === 'http/json' ? new JsonExporter() : new ProtobufExporter()
}

/**
 * Starts tracing for this process and installs its parts; call once, before the app loads.
 * `config.trustedProxies` are the peers whose trace context is followed (caller-context.ts).
 */
export function startTracing(
  config: Pick<Config, 'env' | 'trustedProxies'>,
  tracing: TracingConfig,
): void {
  const { processor, log } = exportPipeline(exporterOf(tracing), tracing)
  const version = packageVersion()
  const provider = new TracerProvider({
    resource: resourceOf(config, version),
    sampler: samplerOf(tracing),
    spanProcessors: [processor],
  })
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  propagation.setGlobalPropagator(new TrustedPeerPropagator(new W3CTraceContextPropagator()))
  trace.setGlobalTracerProvider(provider)
  // The SDK's own warnings and errors go to the service's log. Its global error handler is
  // silenced: what reaches it here is a failed export, on every batch, which the pipeline says
  // once instead.
  diag.setLogger(
    {
      error: (message) => log.warn({ detail: message }, 'tracing: OpenTelemetry reports an error'),
      warn: (message) => log.warn({ detail: message }, 'tracing: OpenTelemetry warns'),
      info: () => {},
      debug: () => {},
      verbose: () => {},
    },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  )
  setGlobalErrorHandler(() => {})

  // The request's span only: a span per hook and handler would cost more than it shows. No
  // exception events: a 4xx is an answer, and a 5xx's cause is in the log (D4).
  const fastifyOtel = new FastifyOtelInstrumentation({
    instrumentHooks: false,
    instrumentHandler: false,
    recordExceptions: false,
  })
  registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      new PgInstrumentation({ requireParentSpan: true }),
      new IORedisInstrumentation({ requireParentSpan: true }),
      fastifyOtel,
    ],
  })
  const tracer = provider.getTracer('petstore', version)

  const parts: Tracing = {
    fastifyOtel: followingTrustedPeers(fastifyOtel.plugin(), trustedPeers(config.trustedProxies)),
    traceStore: (store) => tracedSqliteStore(store, tracer),
    attach: (target) => {
      log.attach(target)
      const { protocol, sampler, samplerRatio } = tracing
      const ratio = sampler.endsWith('traceidratio') ? { ratio: samplerRatio } : {}
      target.info(
        { endpoint: loggableEndpoint(tracing.endpoint), protocol, sampler, ...ratio },
        'tracing: spans are exported over OTLP/HTTP',
      )
    },
    shutdown: () => flushWithin(provider, FLUSH_TIMEOUT_MS, log),
  }
  installTracing(parts)
}

/** Exports what is queued, waiting FLUSH_TIMEOUT_MS at most: a slow collector never holds a stop. */
async function flushWithin(
  provider: TracerProvider,
  timeoutMs: number,
  log: { warn(fields: object, message: string): void },
): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), timeoutMs)
  })
  const done = provider.shutdown().then(
    () => 'done' as const,
    () => 'done' as const,
  )
  const outcome = await Promise.race([done, late])
  clearTimeout(timer)
  if (outcome === 'late') {
    log.warn(
      { waitedMs: timeoutMs },
      'tracing: the last spans were not exported in time; stopping without them',
    )
  }
}
