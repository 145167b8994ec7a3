// An overload: thousands of extra connections from wrk while health probes are sent on fresh
// connections, as an orchestrator's are, and timed (D20).
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { setTimeout as delay } from 'node:timers/promises'
import { percentile, requireWrk } from '../bench/harness.ts'
import { probe } from './probe.ts'
import type { FloodReport } from './report.ts'

/** Kubernetes' default probe timeout: a /healthz slower than this counts as failed. */
export const PROBE_TIMEOUT_MS = 1_000
/** A probe gives up after this; one that got no answer at all counts as this long. */
const NO_ANSWER_MS = 5_000
/** How often each probed URL is probed during a flood. */
const PROBE_EVERY_MS = 100

export interface FloodLoad {
  connections: number
  seconds: number
  /** The API key the flood's requests carry. */
  key: string
}

/** Where a flood's probes go: a label for the report and the URLs probed in turn. */
export interface ProbeTarget {
  label: string
  urls: string[]
  /** Whether its p99 must stay within PROBE_TIMEOUT_MS for the run to hold. */
  mustHold: boolean
}

/**
 * `load.connections` extra connections (wrk, GET /v1/pets?limit=20) at `target` for
 * `load.seconds` while every URL of every probe target is probed on fresh connections, one
 * probe every PROBE_EVERY_MS whether or not the one before has answered, as an orchestrator's are.
 */
export async function flood(
  load: FloodLoad,
  name: string,
  target: string,
  probed: ProbeTarget[],
): Promise<FloodReport> {
  const wrk = spawn(
    requireWrk(),
    [
      '-t2',
      `-c${load.connections}`,
      `-d${load.seconds}s`,
      '--timeout',
      '10s',
      '-H',
      `Authorization: Bearer ${load.key}`,
      `${target}/v1/pets?limit=20`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let output = ''
  wrk.stdout.on('data', (chunk) => {
    output += chunk
  })
  const finished = once(wrk, 'exit')
  let running = true
  void finished.then(() => {
    running = false
  })
  const pending: Promise<void>[] = []
  const probeEvery = async (url: string, times: number[], failed: { count: number }) => {
    // Probing begins once wrk holds its connections and ends with it.
    await delay(500)
    while (running) {
      pending.push(
        probe(url, NO_ANSWER_MS).then((answer) => {
          if (answer.status !== 200 || answer.ms > PROBE_TIMEOUT_MS) failed.count++
          // Refused or reset counts as never answered, not as fast.
          times.push(answer.status === undefined ? NO_ANSWER_MS : answer.ms)
        }),
      )
      await delay(PROBE_EVERY_MS)
    }
  }
  const samples = probed.map((t) => ({ target: t, times: [] as number[], failed: { count: 0 } }))
  await Promise.all([
    finished,
    ...samples.flatMap((s) => s.target.urls.map((url) => probeEvery(url, s.times, s.failed))),
  ])
  await Promise.all(pending)
  return {
    name,
    connections: load.connections,
    seconds: load.seconds,
    wrk: output.trim(),
    probes: samples.map(({ target, times, failed }) => ({
      label: target.label,
      mustHold: target.mustHold,
      count: times.length,
      failed: failed.count,
      p50: percentile(times, 50),
      p99: percentile(times, 99),
      max: Math.max(...times),
    })),
  }
}
