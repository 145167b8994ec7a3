// `npx petstore serve` (D11). npm runs a command through `sh -c` and passes SIGTERM/SIGINT on to
// that shell only. Debian's and Ubuntu's sh (dash) does not replace itself with the command, so
// it stays between npm and the server and dies of the signal without passing it on: the server
// was left serving as an orphan. `npm start` avoids this with `exec` in the script
// (package.json); npx builds its command line itself, so it cannot. So a server that npm started
// watches its parent, and drains as on SIGTERM once the parent is gone. npm has exited by then;
// in a container, where everything left dies with PID 1, run `npm start` or node instead.

/** How often a server started by npm checks that its parent still runs. */
const PARENT_CHECK_MS = 250

/** Call once, in the process the operator started, when npm started it. */
export function drainWhenLauncherEnds(): void {
  const parent = process.ppid
  const watch = setInterval(() => {
    if (process.ppid === parent) return
    clearInterval(watch)
    process.stderr.write(
      `petstore: the process that started this one (pid ${parent}) has ended; shutting down as on SIGTERM\n`,
    )
    process.kill(process.pid, 'SIGTERM')
  }, PARENT_CHECK_MS).unref()
}
