// `petstore serve --workers N`: N copies of the instance on one port, for the cores of one box
// (node:cluster; the primary hands each new connection to the next worker in turn).
//
// The primary serves nothing itself. It applies the migrations before any worker exists, and
// issues the first-start key once every worker has bound its ports, so that N workers never race
// to migrate or to print keys (D3). Then it forks the workers, replaces one that dies, and on SIGTERM/SIGINT asks each to
// drain as a lone `serve` would (D11) and exits 0 once they all have.
//
// The primary asks by IPC message rather than by sending the signal on: a terminal's Ctrl-C
// and systemd's default KillMode deliver the signal to every process of the group, and a
// second, forwarded signal would read as an operator's "stop now". A worker drains once,
// whatever asked it first; escalation (a second signal, a deadline) belongs to the primary.
import cluster, { type Worker } from 'node:cluster'
import { type Logger, pino } from 'pino'
import type { Config } from '../config.ts'
import { logDestination, loggerOptions } from '../observability/logging.ts'
import { clusterScrape } from '../observability/metrics.ts'
import { listenForScrapes } from '../observability/metrics-server.ts'
import { onOpenStore } from '../store/open.ts'
import { startInstance } from './instance.ts'
import {
  FIRST_KEY_FAILED,
  noticeUnknownSettings,
  noticeUnprefixedKeys,
  offerFirstKey,
  startLine,
} from './prepare.ts'
import { prepareSchema, type SchemaNotice } from './schema.ts'
import {
  DRAIN_MS,
  drainAndExit,
  dropWritesToGonePipes,
  onTerminationSignals,
  uncaughtFields,
} from './shutdown.ts'

export const MAX_WORKERS = 256

/** A worker drains within DRAIN_MS, like a lone `serve`; the primary waits a little longer. */
const PRIMARY_WAIT_MS = DRAIN_MS + 5000
/** Workers that die before listening this many times in a row will not start: give up. */
const MAX_START_FAILURES = 3

const SHUTDOWN = 'petstore:shutdown'

interface ShutdownMessage {
  type: typeof SHUTDOWN
  signal: NodeJS.Signals
}

function isShutdownMessage(message: unknown): message is ShutdownMessage {
  return (
    typeof message === 'object' &&
    message !== null &&
    (message as { type?: unknown }).type === SHUTDOWN
  )
}

/** Runs the primary in the process the operator started; cluster.fork() re-runs it as a worker. */
export function serveCluster(config: Readonly<Config>, workers: number): Promise<void> {
  return cluster.isPrimary ? runPrimary(config, workers) : runWorker(config)
}

// ---------------------------------------------------------------------------------------------
// Primary

/**
 * The primary has no Fastify instance; it logs through pino as the workers do, with the same
 * options (level, redaction) and destination, marked `role: "primary"`, beside its workers' lines.
 * Synchronous (logDestination), because the primary ends with process.exit, which must not cut
 * its last lines.
 */
function primaryLogger(config: Pick<Config, 'logLevel'>): Logger {
  const logger = pino(loggerOptions(config), logDestination())
  return logger.child({ role: 'primary' })
}

async function runPrimary(config: Readonly<Config>, count: number): Promise<void> {
  const log = primaryLogger(config)
  let schemaNotices: SchemaNotice[] = []
  await onOpenStore(config.database, async (store) => {
    schemaNotices = await prepareSchema(store, config)
  })
  for (const notice of schemaNotices) log[notice.level](notice.fields, notice.message)
  const start = startLine(config, count)
  log.info(start.fields, start.message)
  noticeUnprefixedKeys(config, log)
  noticeUnknownSettings(config, log)
  if (count > 1 && config.rateLimit > 0 && config.redis === undefined) {
    log.warn(
      { workers: count, rateLimit: config.rateLimit },
      'without REDIS_URL each worker counts rate limits on its own, so a key may make up to ' +
        'workers × PETSTORE_RATE_LIMIT requests a minute; set REDIS_URL to share one budget',
    )
  }
  // D17: one scrape of the primary sees every worker's figures, summed. Before the workers
  // start, so that a port in use stops the start before anything serves.
  if (config.metrics !== undefined) {
    const metrics = await listenForScrapes(config.metrics, clusterScrape(), log)
    metrics.announce()
  }
  // D3's first key once every worker has bound its ports, so that a start that fails has
  // spent none.
  const offerKey = () =>
    onOpenStore(config.database, (store) => offerFirstKey(store.apiKeys, config, log)).catch(
      (err) => log.error({ err }, FIRST_KEY_FAILED),
    )
  new Supervisor(count, log, offerKey).start()
}

class Supervisor {
  readonly #count: number
  readonly #log: Logger
  readonly #live = new Set<Worker>()
  readonly #listened = new WeakSet<Worker>()
  #startFailures = 0
  #shuttingDown = false
  #exitCode = 0
  /** Called once, when `count` live workers have listened. */
  #whenListening: (() => unknown) | undefined

  constructor(count: number, log: Logger, whenListening: () => unknown) {
    this.#count = count
    this.#log = log
    this.#whenListening = whenListening
  }

  start(): void {
    // Workers run this same command line (cluster's default exec and args) and take the
    // worker branch of serveCluster.
    cluster.on('exit', (worker, code, signal) => this.#exited(worker, code, signal))
    onTerminationSignals({
      first: (signal) => {
        this.#log.info({ signal }, 'shutting down: workers finish their requests')
        this.#shutDown(signal)
      },
      again: (signal) => {
        this.#log.warn({ signal }, `second ${signal}: stopping the workers now`)
        this.#kill()
      },
    })
    // As a lone `serve` does: say what it was, then let the workers drain, and exit 1.
    const fail = (err: unknown, origin: string) => {
      this.#log.error(uncaughtFields(err, origin), 'shutting down after an uncaught error')
      this.#exitCode = 1
      if (!this.#shuttingDown) this.#shutDown('SIGTERM')
    }
    process.on('uncaughtException', fail)
    process.on('unhandledRejection', (reason) => fail(reason, 'unhandledRejection'))
    dropWritesToGonePipes()
    this.#log.info({ workers: this.#count }, 'starting workers')
    for (let i = 0; i < this.#count; i++) this.#fork()
  }

  #fork(): void {
    const worker = cluster.fork()
    this.#live.add(worker)
    // D16: a message to a worker whose channel has closed (it is exiting, still listed in
    // cluster.workers until its exit) is an 'error' event on the Worker when the sender passed no
    // callback, as prom-client's scrape of every worker does (AggregatorRegistry); unheard, it
    // ended the primary. The worker's exit is handled by #exited; the scrape fails on its own.
    worker.on('error', (err: Error) => {
      this.#log.warn({ err, worker: worker.id }, 'a message to a worker could not be sent')
    })
    worker.once('listening', () => {
      this.#listened.add(worker)
      this.#startFailures = 0
      this.#log.info({ worker: worker.id, workerPid: worker.process.pid }, 'worker listening')
      // Every live worker, not every 'listening' so far: a replacement's would count twice.
      const allListen = [...this.#live].every((live) => this.#listened.has(live))
      if (allListen && this.#live.size === this.#count && !this.#shuttingDown) {
        this.#whenListening?.()
        this.#whenListening = undefined
      }
    })
  }

  #exited(worker: Worker, code: number | null, signal: string | null): void {
    this.#live.delete(worker)
    const fields = { worker: worker.id, workerPid: worker.process.pid, code, signal }
    if (this.#shuttingDown) {
      if (code !== 0) this.#exitCode = 1
      this.#log.info(fields, 'worker stopped')
      if (this.#live.size === 0) this.#finish()
      return
    }
    if (!this.#listened.has(worker)) this.#startFailures += 1
    if (this.#startFailures >= MAX_START_FAILURES) {
      this.#log.error(
        fields,
        `workers failed to start ${MAX_START_FAILURES} times in a row; stopping`,
      )
      this.#exitCode = 1
      this.#shutDown('SIGTERM')
      return
    }
    this.#log.error(fields, 'worker exited unexpectedly; starting a replacement')
    this.#fork()
  }

  #shutDown(signal: NodeJS.Signals): void {
    this.#shuttingDown = true
    const message: ShutdownMessage = { type: SHUTDOWN, signal }
    for (const worker of this.#live) {
      // A worker whose channel has just closed cannot get the message; the signal still works.
      const bySignal = () => worker.process.kill(signal)
      if (!worker.isConnected()) bySignal()
      else worker.send(message, (err: Error | null) => err && bySignal())
    }
    setTimeout(() => {
      this.#log.error({ waitedMs: PRIMARY_WAIT_MS }, 'workers did not finish in time')
      this.#kill()
    }, PRIMARY_WAIT_MS).unref()
    if (this.#live.size === 0) this.#finish()
  }

  #kill(): never {
    for (const worker of this.#live) worker.process.kill('SIGKILL')
    process.exit(1)
  }

  #finish(): void {
    if (this.#exitCode === 0) this.#log.info('shut down cleanly')
    else this.#log.warn('stopped with errors (logged above); exit code 1')
    process.exit(this.#exitCode)
  }
}

// ---------------------------------------------------------------------------------------------
// Worker

async function runWorker(config: Readonly<Config>): Promise<void> {
  let instance: Awaited<ReturnType<typeof startInstance>> | undefined
  let stopping = false

  const stop = (reason: object, code: number): void => {
    if (stopping) return
    stopping = true
    // Asked before it listened: nothing was accepted, so there is nothing to drain.
    if (instance === undefined) process.exit(code)
    const running = instance
    drainAndExit(() => running.close(), running.app.log, reason, code)
  }

  // Installed before the instance starts, so that a shutdown asked during start is not lost.
  process.on('message', (message) => {
    if (isShutdownMessage(message)) stop({ signal: message.signal, from: 'primary' }, 0)
  })
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => stop({ signal }, 0))
  // The primary is gone (crashed or killed): a worker must not outlive it unsupervised.
  process.on('disconnect', () => stop({ reason: 'the primary process is gone' }, 0))
  // D16: a message to the primary sent without a callback once the channel has closed (by
  // prom-client's answer to a scrape) is an 'error' event on `process`; unheard, it would end
  // the worker as an uncaught error. The primary is gone: 'disconnect' above stops this worker.
  process.on('error', (err) => {
    instance?.app.log.warn({ err }, 'a message to the primary could not be sent')
  })
  // As a lone `serve` does: drain, then exit 1, and the primary replaces us.
  const fail = (err: unknown, origin: string) => {
    const fields = uncaughtFields(err, origin)
    if (instance === undefined) {
      const emitted = fields.emitter
        ? `\nEmitted 'error' event on ${fields.emitter} at:\n${fields.emittedAt}`
        : ''
      process.stderr.write(`${err instanceof Error ? err.stack : String(err)}${emitted}\n`)
      process.exit(1)
    }
    instance.app.log.error(fields, 'shutting down after an uncaught error')
    stop({ reason: 'uncaught error' }, 1)
  }
  process.on('uncaughtException', fail)
  process.on('unhandledRejection', (reason) => fail(reason, 'unhandledRejection'))
  dropWritesToGonePipes()

  instance = await startInstance(config, { prepared: true, clusterWorker: true })
  await instance.listen()
}
