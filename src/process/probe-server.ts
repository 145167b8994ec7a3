// D20: /healthz and /readyz on a listener of their own (PROBE_PORT on PROBE_HOST), answered by a
// thread of their own (probe-thread.ts), for an orchestrator's probes. A flood of connections
// and requests holds the API's event loop, and a probe that waited behind it (as one on the API's
// port does, or on a listener of that same loop) timed out, and a liveness probe got a busy but
// healthy process restarted. The probe thread never waits for that loop: this module publishes
// what the answers need (probe-memory.ts), a heartbeat on every turn of a timer, the draining
// and shedding flags, and the readiness it checks on an interval, and the thread answers from it.
// /healthz is 503 only once the API's loop has not turned for PETSTORE_LIVENESS_STALL_MS: stuck,
// not busy. The answers are the API port's (routes/health.ts), without its headers.
//
// Under --workers each worker has its thread, which binds the port itself (SO_REUSEPORT, Linux),
// the kernel spreading probes over them.
import { getCompileCacheDir } from 'node:module'
import { dirname } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { Worker } from 'node:worker_threads'
import type { SideListener } from '../config.ts'
import { errorBody } from '../errors.ts'
import { SHED_ANSWER } from '../http/plugins/load-shedding.ts'
import {
  ALIVE,
  LIVENESS_PATH,
  type ProbeAnswer,
  READINESS_PATH,
  SHUTTING_DOWN,
  STARTING,
} from '../http/routes/health.ts'
import {
  type AnnouncedServer,
  type ListenerLogger,
  SideListenError,
} from '../observability/side-listener.ts'
import { ProbeWriter, probeMemory } from './probe-memory.ts'
import type { FromProbeThread, ProbeThreadData, ToProbeThread } from './probe-thread.ts'

export interface ProbeServer extends AnnouncedServer {
  /** e.g. http://127.0.0.1:8081 */
  readonly origin: string
  /** Publishes draining and shedding now, not at the next heartbeat (a drain's first step). */
  publish(): void
}

export interface Probes {
  /** Whether this process should be sent requests: asked every `readinessIntervalMs`. */
  ready(): Promise<ProbeAnswer>
  /** Whether the API's requests are being shed now (D16). */
  shedding(): boolean
  /** Whether the process drains (D11). */
  draining(): boolean
}

export interface ProbeOptions {
  /** A worker of `serve --workers`: the thread binds the port itself (SO_REUSEPORT). */
  ownSocketPerProcess: boolean
  /** PETSTORE_LIVENESS_STALL_MS. */
  stallMs: number
  /** How often readiness is checked (the store pinged); a second unless a test says. */
  readinessIntervalMs?: number
}

/** D20: the heartbeat's period; a loop silent for a few of these is already far behind. */
const HEARTBEAT_MS = 100
const READINESS_INTERVAL_MS = 1_000
/** D20: a check may take its ping's own time-out and more under load before it counts stale. */
const READINESS_MARGIN_MS = 2_000
/** D11: a thread that does not say it closed is ended anyway; the drain goes on. */
const CLOSE_WAIT_MS = 1_000

/** The folder given to the compile cache (getCompileCacheDir() is the version's folder in it). */
function compileCacheFolder(): string | undefined {
  const folder = getCompileCacheDir?.()
  return folder === undefined ? undefined : dirname(folder)
}

/**
 * The thread answers small probes and keeps next to nothing: a small heap of its own keeps what
 * it adds to the process's memory small (docs/benchmarks.md).
 */
const PROBE_THREAD_LIMITS = { maxYoungGenerationSizeMb: 1, maxOldGenerationSizeMb: 32 }

function unavailable(message: string): ProbeAnswer {
  return { statusCode: 503, retryAfter: '1', body: errorBody('unavailable', message) }
}

export async function listenForProbes(
  listener: SideListener,
  probes: Probes,
  log: ListenerLogger,
  options: ProbeOptions,
): Promise<ProbeServer> {
  const readinessIntervalMs = options.readinessIntervalMs ?? READINESS_INTERVAL_MS
  const memory = probeMemory()
  const shared = new ProbeWriter(memory)
  const data: ProbeThreadData = {
    listener,
    // Each worker's thread binds the port itself: a thread has no cluster primary to share a
    // socket through, so `serve --workers` with PROBE_PORT needs Linux's SO_REUSEPORT
    // (cli/petstore.ts refuses it elsewhere).
    reusePort: options.ownSocketPerProcess,
    memory,
    stallMs: options.stallMs,
    readinessStaleMs: readinessIntervalMs + READINESS_MARGIN_MS,
    paths: { liveness: LIVENESS_PATH, readiness: READINESS_PATH },
    compileCache: compileCacheFolder(),
    answers: {
      alive: ALIVE,
      stalled: unavailable(
        `the service's event loop has not turned for over ${options.stallMs} ms`,
      ),
      starting: STARTING,
      stale: unavailable('the service has not checked its readiness in time'),
      shuttingDown: SHUTTING_DOWN,
      // The API port's /readyz is shed with 503 under overload; this one says the same.
      overloaded: { ...unavailable(SHED_ANSWER.message), retryAfter: SHED_ANSWER.retryAfter },
    },
  }
  const publish = () => {
    shared.beat()
    shared.flags(probes.draining(), probes.shedding())
  }
  publish()
  const heartbeat = setInterval(publish, HEARTBEAT_MS)
  heartbeat.unref()
  const thread = new Worker(new URL('./probe-thread-start.js', import.meta.url), {
    workerData: data,
    resourceLimits: PROBE_THREAD_LIMITS,
  })
  let closing = false
  const exited = new Promise<void>((resolve) => {
    thread.once('exit', (code) => {
      // Probes then find nothing listening: an orchestrator restarts the process, as it should.
      if (!closing) log.error({ code }, 'the probe thread ended; PROBE_PORT is not answered')
      resolve()
    })
  })
  const origin = await threadListening(thread, listener, log).catch((err: unknown) => {
    closing = true
    clearInterval(heartbeat)
    throw err
  })

  let checking = false
  const check = async () => {
    if (checking) return
    checking = true
    try {
      const answer = await probes.ready()
      shared.readinessChecked()
      thread.postMessage({ type: 'readiness', answer } satisfies ToProbeThread)
    } catch (err) {
      log.error({ err }, 'readiness check failed')
    } finally {
      checking = false
    }
  }
  const readiness = setInterval(check, readinessIntervalMs)
  check()
  // Neither the timers nor the thread keep the process alive while it serves: the API's server
  // does. close() refs the thread again, so a drain waits for it to close.
  readiness.unref()
  thread.unref()

  return {
    origin,
    publish,
    // Once every listener is bound: readiness is checked again then, not a second later.
    announce: () => {
      log.info({ url: origin }, `probes (/healthz, /readyz) listening at ${origin}`)
      check()
    },
    close: async () => {
      closing = true
      clearInterval(heartbeat)
      clearInterval(readiness)
      // Unref'd, the thread's port would let the process end here, before the store closes.
      thread.ref()
      const closed = new Promise<void>((resolve) => {
        thread.on('message', (message: FromProbeThread) => {
          if (message.type === 'closed') resolve()
        })
      })
      thread.postMessage({ type: 'close' } satisfies ToProbeThread)
      await Promise.race([closed, exited, delay(CLOSE_WAIT_MS, undefined, { ref: false })])
      await thread.terminate()
    },
  }
}

/** The thread's origin once it listens; its failure to listen as the start reports a port's. */
function threadListening(
  thread: Worker,
  listener: SideListener,
  log: ListenerLogger,
): Promise<string> {
  return new Promise((resolve, reject) => {
    thread.on('message', (message: FromProbeThread) => {
      if (message.type === 'listening') resolve(message.origin)
      else if (message.type === 'listen-failed') {
        thread.terminate()
        const cause = Object.assign(message.error, { code: message.code })
        reject(new SideListenError('PROBE', listener, cause))
      } else if (message.type === 'log') log.error(message.fields, message.message)
    })
    thread.on('error', (err) => {
      log.error({ err }, 'the probe thread failed')
      reject(new SideListenError('PROBE', listener, err))
    })
  })
}
