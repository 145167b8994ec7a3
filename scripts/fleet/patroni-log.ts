// Patroni's own timeline of a fault, read from its members' logs: what each member decided and
// when (a lock taken, a demotion, a restart, a member following another), so that
// docs/fleet-report.md shows what the engine did beside what the callers saw.

export interface PatroniEvent {
  /** Milliseconds since the fault began. */
  atMs: number
  member: string
  message: string
}

/** `2026-12-07 21:47:36,062 INFO: message`: Patroni's own lines (PostgreSQL's are not). */
const LINE = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}),(\d{3}) (INFO|WARNING|ERROR|CRITICAL): (.*)$/

/**
 * What a member says at every loop when nothing changes, bookkeeping around what did, and the
 * detail of a request's failure (the decision that follows it is kept); a timeline of those
 * would hide the decisions. A Python traceback's body (indented) is never a Patroni line.
 */
const ROUTINE = [
  /^no action\./,
  /^establishing a new patroni connection/,
  /^closed patroni connection/,
  /^Dropped unknown replication slot/,
  /^Local timeline=/,
  /^primary_timeline=/,
  /^primary: history=/,
  /^postmaster pid=/,
  /^get_postgresql_status/,
  /^pg_controldata/,
  /^Got response from /,
  /^Could not activate Linux watchdog/,
  /^No PostgreSQL configuration items changed/,
  /^Reconnection allowed/,
  /^Retrying on /,
  /^Selected new etcd server/,
  /^watchprefix failed/,
  /^Failed to get list of machines/,
  /^\s*(stdout|stderr)=/,
  /^Traceback/,
  /^Exception happened during processing of request/,
]

/** Longer messages (a request's error, a member's status) are cut: the report shows the gist. */
const MESSAGE_LENGTH = 140

/**
 * Two messages that differ only in numbers (ports, pids, positions) are the same event, and so
 * are all of a member's failed requests to etcd: the first says it lost etcd.
 */
const sameEvent = (message: string) =>
  message.startsWith('Request to server ') ? 'Request to server' : message.replace(/\d+/g, '#')

/**
 * The decisions in `logs` (member name → its log) between `from` and `to` (Date.now() values),
 * in order, each timed from `from`; a message a member repeats is kept once.
 */
export function patroniTimeline(
  logs: ReadonlyMap<string, string>,
  from: number,
  to: number,
): PatroniEvent[] {
  const events: PatroniEvent[] = []
  for (const [member, log] of logs) {
    const seen = new Set<string>()
    for (const line of log.split('\n')) {
      const match = LINE.exec(line.trim())
      if (match === null) continue
      const [, day, time, millis, , message = ''] = match
      // Patroni writes local time without a zone; Date reads such a string as local time too.
      const at = new Date(`${day}T${time}.${millis}`).getTime()
      const event = sameEvent(message)
      if (at < from || at > to || ROUTINE.some((r) => r.test(message)) || seen.has(event)) {
        continue
      }
      seen.add(event)
      const cut = message.length > MESSAGE_LENGTH ? `${message.slice(0, MESSAGE_LENGTH)}…` : message
      events.push({ atMs: at - from, member, message: cut })
    }
  }
  return events.sort((a, b) => a.atMs - b.atMs)
}
