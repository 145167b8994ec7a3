// How `petstore serve` takes SIGTERM and SIGINT in the process the operator started (D11),
// whatever started it: `node bin/petstore.js serve`, `npm start` or `npx petstore serve`.
//
// npm runs a script through `sh -c` and passes SIGTERM/SIGINT on to that shell only. Debian's
// and Ubuntu's sh (dash) does not replace itself with the script's last command, so it stayed
// between npm and the server, died of the signal without passing it on, and npm exited after
// it: the server was left serving as an orphan, and `docker stop` never drained it. The start
// script now `exec`s node, so npm's child is the server itself (package.json). Two consequences
// are handled here, once, before the server installs its shutdown (server.ts, cluster.ts):
//
// - One signal can arrive twice. A terminal's Ctrl-C and systemd's default KillMode signal every
//   process, the server included, and npm passes its own copy on at once. D11 reads a second
//   signal as "stop now", so termination signals within REPEAT_MS of the first are that first.
// - `npx petstore serve` cannot exec: npm builds that command line itself, so npm's shell stays
//   in between and the server is told nothing when that shell dies. So, when npm started it, the
//   server watches its parent, and drains as on SIGTERM once the parent is gone. npm has exited
//   by then; in a container, where everything left dies with PID 1, start it another way.
import cluster from 'node:cluster'

const TERMINATION = ['SIGTERM', 'SIGINT'] as const

/** A termination signal this soon after the first is a copy of it, not an operator's second. */
export const REPEAT_MS = 1000

/** How often a server started by npm checks that its parent still runs. */
const PARENT_CHECK_MS = 250

function isTermination(event: string | symbol): event is (typeof TERMINATION)[number] {
  return event === 'SIGTERM' || event === 'SIGINT'
}

/** For the primary process of `serve`; cluster workers take their orders from the primary. */
export function handleOperatorSignals(): void {
  if (!cluster.isPrimary) return
  let firstAt: number | undefined

  // Node delivers every signal through process.emit, bound when the first listener of that signal
  // is added; wrapped before that, a copy is dropped before any listener sees it.
  const emit = process.emit
  process.emit = function (this: NodeJS.Process, event: string | symbol, ...args: unknown[]) {
    if (isTermination(event)) {
      const now = performance.now()
      if (firstAt !== undefined && now - firstAt < REPEAT_MS) return false
      firstAt ??= now
    }
    return Reflect.apply(emit, this, [event, ...args]) as boolean
  } as typeof process.emit

  // Kept for the life of the process, so that the signal's handler stays installed while the
  // shutdown code swaps its own listeners (close-with-grace removes its first and adds another;
  // with none left for a moment, a copy arriving then would kill the process outright). Until
  // the server has installed its shutdown, a signal still ends the process as it would without
  // any listener: nothing has been accepted yet, so there is nothing to drain.
  const beforeShutdownIsInstalled = (signal: NodeJS.Signals) => {
    if (process.listenerCount(signal) > 1) return
    for (const name of TERMINATION) process.removeListener(name, beforeShutdownIsInstalled)
    process.kill(process.pid, signal)
  }
  for (const name of TERMINATION) process.on(name, beforeShutdownIsInstalled)

  // npm sets npm_lifecycle_event in the environment of what it runs (`start`, `npx`).
  if (process.env.npm_lifecycle_event === undefined) return
  const parent = process.ppid
  const watch = setInterval(() => {
    if (firstAt !== undefined) {
      clearInterval(watch)
    } else if (process.ppid !== parent) {
      clearInterval(watch)
      process.stderr.write(
        `petstore: the process that started this one (pid ${parent}) has ended; shutting down as on SIGTERM\n`,
      )
      process.kill(process.pid, 'SIGTERM')
    }
  }, PARENT_CHECK_MS).unref()
}
