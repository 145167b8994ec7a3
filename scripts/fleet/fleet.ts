// The fleet `npm run fleet` puts through its faults, built on one machine the way docs/fleet.md
// and deploy/patroni tell operators to build it:
// - the Patroni reference topology (patroni-cluster.ts: three etcd members, three PostgreSQL
//   members under Patroni in synchronous_mode_strict, HAProxy on /primary, PgBouncer in
//   transaction mode in front of it; D30), the schema migrated by its owner and the service's
//   role given grants.sql and a statement timeout (docs/operations.md);
// - Redis for the rate-limit counts (test/helpers/redis-server.ts);
// - three instances of the service, `serve --workers 2` each, on PgBouncer and Redis;
// - HAProxy 2.6 with docs/fleet.md's configuration in front of them, health-checking /readyz;
// - tracing on (D23), with the default sampler, to an OTLP/HTTP receiver.
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { freePort } from '../../test/helpers/free-port.ts'
import { type HAProxy, startHAProxy } from '../../test/helpers/haproxy.ts'
import { type OtlpReceiver, startOtlpReceiver } from '../../test/helpers/otlp-receiver.ts'
import { onDatabase } from '../../test/helpers/postgres.ts'
import { runCli, type ServiceProcess, startService } from '../../test/helpers/process.ts'
import { type RedisServer, startRedisServer } from '../../test/helpers/redis-server.ts'
import { type PatroniCluster, SERVICE_ROLE, startPatroniCluster } from './patroni-cluster.ts'

const ROOT = join(import.meta.dirname, '../..')

export interface FleetSetup {
  instances: number
  workers: number
}

export interface Fleet {
  setup: FleetSetup
  cluster: PatroniCluster
  redis: RedisServer
  receiver: OtlpReceiver
  balancer: HAProxy
  ports: number[]
  /** Each instance's PROBE_PORT (D20). */
  probePorts: number[]
  instances: ServiceProcess[]
  /** Every instance process started in the run, replaced ones too: their logs are read at the end. */
  started: ServiceProcess[]
  key: string
  /** Instances that exited without being told to: when (performance.now()), which, how. */
  exits: Array<{ at: number; instance: number; code: number | null }>
  /** Starts instance `i` on its ports (after `stop(i)`); resolves once it listens. */
  start(i: number): Promise<ServiceProcess>
  /** Stops instance `i` with `signal`, as a deploy or a fault does; resolves with its exit code. */
  stop(i: number, signal: NodeJS.Signals): Promise<number | null>
}

/** What stops each part started so far, newest first: a run never leaves a server behind. */
export class Parts {
  readonly #stops: Array<() => Promise<unknown>> = []
  add(stop: () => Promise<unknown>): void {
    this.#stops.push(stop)
  }
  async stopAll(): Promise<void> {
    while (this.#stops.length > 0)
      await this.#stops
        .pop()?.()
        .catch(() => {})
  }
}

/**
 * What an operator does once the cluster leads: `petstore migrate` as the owner, then
 * grants.sql for the runtime role, and the role's statement timeout, which PgBouncer's
 * transaction mode needs to be the role's (docs/operations.md "Behind PgBouncer").
 */
async function installSchema(cluster: PatroniCluster): Promise<void> {
  const migrated = await runCli(['migrate'], { DATABASE_URL: cluster.ownerUrl })
  if (migrated.code !== 0) throw new Error(`petstore migrate failed: ${migrated.stderr}`)
  execFileSync('psql', [
    cluster.ownerUrl,
    ...['-v', 'ON_ERROR_STOP=1', '-v', `runtime=${SERVICE_ROLE}`],
    ...['-f', join(ROOT, 'deploy/postgresql/grants.sql')],
  ])
  await onDatabase(cluster.ownerUrl, (client) =>
    client.query(`ALTER ROLE ${SERVICE_ROLE} SET statement_timeout = '5s'`),
  )
}

export async function buildFleet(setup: FleetSetup, parts: Parts): Promise<Fleet> {
  const cluster = await startPatroniCluster()
  parts.add(() => cluster.stop())
  await installSchema(cluster)
  const redis = await startRedisServer()
  parts.add(() => redis.stop())
  const receiver = await startOtlpReceiver()
  parts.add(() => receiver.close())
  const key = `fleet-${randomBytes(24).toString('hex')}`
  const ports: number[] = []
  const probePorts: number[] = []
  for (let i = 0; i < setup.instances; i++) ports.push(await freePort())
  for (let i = 0; i < setup.instances; i++) probePorts.push(await freePort())
  const started: ServiceProcess[] = []
  const exits: Fleet['exits'] = []
  /** The processes the run itself stopped: any other exit is one the fleet must not have. */
  const stopped = new Set<ServiceProcess>()
  const start = async (i: number) => {
    const service = await startService(
      {
        DATABASE_URL: cluster.serviceUrl,
        DATABASE_POOLER: 'transaction',
        // The runtime role cannot migrate (grants.sql); installSchema did, as the owner.
        PETSTORE_MIGRATE: 'off',
        REDIS_URL: redis.url,
        // Counted in Redis, never reached: the users share one key.
        PETSTORE_RATE_LIMIT: '1000000',
        PETSTORE_API_KEYS: key,
        // HAProxy's address: the client address logged and counted for failed
        // authentications is read from its X-Forwarded-For (D3, D8).
        PETSTORE_TRUSTED_PROXIES: '127.0.0.1',
        PORT: String(ports[i]),
        PROBE_PORT: String(probePorts[i]),
        // Load shedding as shipped (D16); the tests' services run without it.
        PETSTORE_MAX_EVENT_LOOP_DELAY_MS: '200',
        LOG_LEVEL: 'warn',
        // Tracing as an operator would turn it on: the default sampler (D23).
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      },
      ['--workers', String(setup.workers)],
    )
    started.push(service)
    void service.exited.then((code) => {
      if (!stopped.has(service)) exits.push({ at: performance.now(), instance: i, code })
    })
    return service
  }
  const instances: ServiceProcess[] = []
  const stop = (i: number, signal: NodeJS.Signals) => {
    const service = instances[i] as ServiceProcess
    stopped.add(service)
    return service.stop(signal)
  }

  parts.add(() => Promise.all(instances.map((_, i) => stop(i, 'SIGTERM'))))
  for (let i = 0; i < setup.instances; i++) instances.push(await start(i))
  const balancer = await startHAProxy(
    ports.map((port, i) => ({ name: `petstore${i + 1}`, address: `127.0.0.1:${port}` })),
  )
  parts.add(() => balancer.stop())
  return {
    setup,
    cluster,
    redis,
    receiver,
    balancer,
    ports,
    probePorts,
    instances,
    started,
    key,
    exits,
    start,
    stop,
  }
}
