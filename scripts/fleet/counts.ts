// What each fault cost, counted as Jepsen counts it (the checks of Patroni's own Jepsen suite):
// against the final read of the database, for the calls that began in the fault's window, how
// many acknowledged creates are missing, how many logical creates were stored twice, how many
// failed to their caller yet were stored (the outcome unknown to the caller: reported, never
// hidden), how many calls failed to their caller after the SDK's retries, what the service
// answered instead of a success (a 500 is a bug; during a gap every refusal is a 503 with
// Retry-After), how many instances ended by themselves, and the write gap.
import { type StoredCheck, type UsersRun, writeGapMs } from '../../test/helpers/fleet-users.ts'

/** A fault's window on the run's clock (performance.now()): from the fault to full service and
 * a settling time after it. */
export interface Window {
  start: number
  end: number
}

/** Everything the counts are read from, gathered at the end of the run. */
export interface Evidence {
  users: UsersRun
  canary: UsersRun
  usersStored: StoredCheck
  canaryStored: StoredCheck
  /** Instances that exited without being told to, and error lines of processes or workers that
   * ended (each at its time on the run's clock). */
  exits: Array<{ at: number; what: string }>
}

export interface Counts {
  /** Creates acknowledged to their caller, users' and canary's. */
  acknowledged: number
  /** Acknowledged creates missing from the final read, or stored otherwise. Must be 0. */
  lost: number
  /** Logical creates stored more than once. Must be 0. */
  twice: number
  /** Creates that failed to their caller and were stored nonetheless. */
  unknown: number
  /** SDK calls, and those that failed to their caller after its retries (must be 0). */
  calls: number
  failures: number
  failureKinds: string[]
  retries: number
  /** Answers other than a success the users' attempts got, by status. */
  answers: Record<string, number>
  /** 503s without Retry-After: a refusal the SDK cannot pace itself by. */
  withoutRetryAfter: number
  /** Instances that ended by themselves, and processes or workers that ended by an error. */
  exited: string[]
  /** The longest stretch without an acknowledged create, from the fault to the window's end. */
  writeGapMs: number
}

const within = (at: number, w: Window) => at >= w.start && at < w.end

/** Names of creates whose call began in `w`, from either run. */
function createsBegunIn(runs: readonly UsersRun[], w: Window): Set<string> {
  const names = new Set<string>()
  for (const run of runs) {
    for (const call of run.calls) {
      if (call.name !== undefined && within(call.start, w)) names.add(call.name)
    }
  }
  return names
}

export function countWindow(w: Window, evidence: Evidence): Counts {
  const { users, canary, usersStored, canaryStored } = evidence
  const runs = [users, canary]
  const begun = createsBegunIn(runs, w)
  const inWindow = (names: readonly string[]) => names.filter((name) => begun.has(name)).length
  const calls = users.calls.filter((c) => within(c.start, w))
  const failures = calls.filter((c) => c.failure !== undefined)
  const answers: Record<string, number> = {}
  let withoutRetryAfter = 0
  for (const answer of users.errorAnswers.filter((a) => within(a.at, w))) {
    answers[answer.status] = (answers[answer.status] ?? 0) + 1
    if (answer.status === 503 && !answer.retryAfter) withoutRetryAfter++
  }
  return {
    acknowledged: runs.reduce(
      (sum, run) => sum + run.acknowledged.filter((pet) => begun.has(pet.name)).length,
      0,
    ),
    lost: inWindow([...usersStored.lostNames, ...canaryStored.lostNames]),
    twice: inWindow([...usersStored.twice, ...canaryStored.twice]),
    unknown: inWindow([
      ...usersStored.unacknowledgedStoredNames,
      ...canaryStored.unacknowledgedStoredNames,
    ]),
    calls: calls.length,
    failures: failures.length,
    failureKinds: [...new Set(failures.map((c) => c.failure as string))].slice(0, 5),
    retries: users.retries.filter((at) => within(at, w)).length,
    answers,
    withoutRetryAfter,
    exited: evidence.exits.filter((e) => within(e.at, w)).map((e) => e.what),
    writeGapMs: writeGapMs(users.calls, w.start, w.end),
  }
}
