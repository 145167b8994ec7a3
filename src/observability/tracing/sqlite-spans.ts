// D23: spans for the embedded store, which no instrumentation covers (pg's driver is traced by
// @opentelemetry/instrumentation-pg). One span per statement batch a repository method runs,
// named as the database semantic conventions ask (`SELECT pets`), with the operation and the
// table, never a bound value. The group commit (D10) is a span of its own, `BATCH INSERT pets`,
// linking the creates it committed; each create's own `INSERT pets` span lasts from its queueing
// to its commit. Spans are made only inside a traced request: the background purge and the
// first-key check make none.
import {
  context,
  type Link,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  type Tracer,
  trace,
} from '@opentelemetry/api'
import type { ApiKeyRepository, CommitTracer, PetRepository, Store } from '../../store/store.ts'

type Operation = 'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE'

function attributes(operation: string, table: string) {
  return {
    'db.system.name': 'sqlite',
    'db.operation.name': operation,
    'db.collection.name': table,
  }
}

/** Runs `run` in a span `operation table`, when a traced request is running; else as is. */
function inSpan<T>(tracer: Tracer, operation: Operation, table: string, run: () => Promise<T>) {
  if (trace.getSpan(context.active()) === undefined) return run()
  return tracer.startActiveSpan(
    `${operation} ${table}`,
    { kind: SpanKind.CLIENT, attributes: attributes(operation, table) },
    async (span: Span) => {
      try {
        return await run()
      } catch (err) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message })
        throw err
      } finally {
        span.end()
      }
    },
  )
}

function tracedPets(pets: PetRepository, tracer: Tracer): PetRepository {
  return {
    create: (pet) => inSpan(tracer, 'INSERT', 'pets', () => pets.create(pet)),
    createIdempotent: (pet, claim) =>
      inSpan(tracer, 'INSERT', 'pets', () => pets.createIdempotent(pet, claim)),
    purgeIdempotencyRecords: (expiredAt, limit) =>
      inSpan(tracer, 'DELETE', 'idempotency_keys', () =>
        pets.purgeIdempotencyRecords(expiredAt, limit),
      ),
    get: (id) => inSpan(tracer, 'SELECT', 'pets', async () => pets.get(id)),
    list: (query) => inSpan(tracer, 'SELECT', 'pets', async () => pets.list(query)),
  }
}

function tracedApiKeys(keys: ApiKeyRepository, tracer: Tracer): ApiKeyRepository {
  return {
    create: (key) => inSpan(tracer, 'INSERT', 'api_keys', () => keys.create(key)),
    findActiveByHash: (hash) =>
      inSpan(tracer, 'SELECT', 'api_keys', () => keys.findActiveByHash(hash)),
    list: () => inSpan(tracer, 'SELECT', 'api_keys', () => keys.list()),
    revoke: (id) => inSpan(tracer, 'UPDATE', 'api_keys', () => keys.revoke(id)),
    countActive: () => inSpan(tracer, 'SELECT', 'api_keys', () => keys.countActive()),
    createFirst: (key) => inSpan(tracer, 'INSERT', 'api_keys', () => keys.createFirst(key)),
  }
}

function isSampledSpanContext(value: object | undefined): value is SpanContext {
  if (value === undefined || !('traceFlags' in value)) return false
  const { traceFlags } = value as SpanContext
  return (traceFlags & TraceFlags.SAMPLED) !== 0
}

/** The group commit's span: linked to each sampled create, a child of the first. */
function commitSpans(tracer: Tracer): CommitTracer {
  return {
    // Called as the create is queued, inside its `INSERT pets` span.
    queued: () => trace.getSpan(context.active())?.spanContext(),
    committed: (queued, began, ended) => {
      const creates = queued.filter(isSampledSpanContext)
      const first = creates[0]
      if (first === undefined) return
      const links: Link[] = creates.map((spanContext) => ({ context: spanContext }))
      const span = tracer.startSpan(
        'BATCH INSERT pets',
        {
          kind: SpanKind.CLIENT,
          startTime: performance.timeOrigin + began,
          links,
          attributes: {
            ...attributes('BATCH INSERT', 'pets'),
            'db.operation.batch.size': queued.length,
          },
        },
        trace.setSpanContext(context.active(), first),
      )
      span.end(performance.timeOrigin + ended)
    },
  }
}

/** `store` (SQLite) with its spans. */
export function tracedSqliteStore(store: Store, tracer: Tracer): Store {
  store.traceCommits?.(commitSpans(tracer))
  return {
    pets: tracedPets(store.pets, tracer),
    apiKeys: tracedApiKeys(store.apiKeys, tracer),
    // Not traced: the staging commands' (D29), run by the CLI, never while serving.
    staging: store.staging,
    environment: store.environment,
    migrate: (environment) => store.migrate(environment),
    schema: () => store.schema(),
    ping: () => store.ping(),
    close: () => store.close(),
    reportOutagesTo: (log) => store.reportOutagesTo(log),
    observe: (observer) => store.observe(observer),
  }
}
