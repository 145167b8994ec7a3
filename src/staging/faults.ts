// D29: random faults for staging (PETSTORE_STAGING_FAULTS), so that a client's soak test meets
// the failures its code must survive: `503:0.05,429:0.02,delay:200ms:0.1` answers 5% of requests
// 503 and 2% 429, and holds 10% for 200 ms more. The answer and the delay are drawn apart: a
// request may be both held and answered 503.

import { PREFER_DELAY_MAX_MS } from '../contract/limits.ts'

/** Statuses every operation documents (contract/responses.ts, commonErrorResponses). */
export const FAULT_STATUSES = [429, 500, 503] as const
export type FaultStatus = (typeof FAULT_STATUSES)[number]

/** A fault's delay is bounded as `Prefer: delay` is. */
const MAX_DELAY_MS = PREFER_DELAY_MAX_MS

export interface StagingFaults {
  /** Each status with its rate (0–1); the rates add up to 1 at most. */
  answers: ReadonlyArray<{ status: FaultStatus; rate: number }>
  /** Held this long, at this rate; undefined when no delay is set. */
  delay: { ms: number; rate: number } | undefined
}

/** What the draw gave one request: an answer, a delay, both or neither. */
export interface Fault {
  status: FaultStatus | undefined
  delayMs: number | undefined
}

const RATE = /^(0|1|0?\.\d+|1\.0*)$/
const SYNTAX = `a comma-separated list of <status>:<rate> (status ${FAULT_STATUSES.join(', ')}) and delay:<ms>ms:<rate>, rates from 0 to 1, e.g. 503:0.05,429:0.02,delay:200ms:0.1`

/** Thrown with the message config.ts puts in its one line. */
export class FaultsSyntaxError extends Error {
  override name = 'FaultsSyntaxError'
}

/** The setting's value; 'off' (its default) is no faults. */
export function parseFaults(raw: string): StagingFaults | undefined {
  if (raw === 'off') return undefined
  const answers: { status: FaultStatus; rate: number }[] = []
  let delay: StagingFaults['delay']
  for (const item of raw.split(',').map((part) => part.trim())) {
    const fields = item.split(':')
    if (fields[0] === 'delay' && fields.length === 3) {
      if (delay !== undefined)
        throw new FaultsSyntaxError(`delay is given twice; it must be ${SYNTAX}`)
      delay = { ms: delayMs(fields[1] ?? '', item), rate: rate(fields[2] ?? '', item) }
      continue
    }
    const status = FAULT_STATUSES.find((known) => String(known) === fields[0])
    if (fields.length !== 2 || status === undefined) {
      throw new FaultsSyntaxError(`"${item}" is not understood; it must be ${SYNTAX}`)
    }
    if (answers.some((answer) => answer.status === status)) {
      throw new FaultsSyntaxError(`${status} is given twice; it must be ${SYNTAX}`)
    }
    answers.push({ status, rate: rate(fields[1] ?? '', item) })
  }
  const total = answers.reduce((sum, answer) => sum + answer.rate, 0)
  if (total > 1) {
    throw new FaultsSyntaxError(`the statuses' rates add up to ${total}, more than 1`)
  }
  return { answers, delay }
}

function rate(raw: string, item: string): number {
  if (!RATE.test(raw) || Number(raw) > 1) {
    throw new FaultsSyntaxError(`"${item}": a rate is a number from 0 to 1, such as 0.05`)
  }
  return Number(raw)
}

function delayMs(raw: string, item: string): number {
  const ms = /^(\d{1,5})ms$/.exec(raw)
  if (ms === null || Number(ms[1]) < 1 || Number(ms[1]) > MAX_DELAY_MS) {
    throw new FaultsSyntaxError(
      `"${item}": a delay is whole milliseconds from 1 to ${MAX_DELAY_MS}, such as 200ms`,
    )
  }
  return Number(ms[1])
}

/** One request's draw: `random` gives numbers in [0, 1), Math.random's way. */
export function drawFault(faults: StagingFaults, random: () => number): Fault {
  let status: FaultStatus | undefined
  let below = random()
  for (const answer of faults.answers) {
    if (below < answer.rate) {
      status = answer.status
      break
    }
    below -= answer.rate
  }
  const { delay } = faults
  const held = delay !== undefined && random() < delay.rate
  return { status, delayMs: held ? delay.ms : undefined }
}
