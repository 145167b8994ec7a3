#!/usr/bin/env node
// Entry point of the `petstore` command. Plain JavaScript so that it can say clearly when the
// Node.js running it is too old: the project's own install brings Node.js 24 (npx petstore …,
// npm start), and the source is TypeScript run by Node 24's type stripping.
const major = Number(process.versions.node.split('.')[0])
if (major < 24) {
  process.stderr.write(
    `petstore needs Node.js 24 or later; this is ${process.version}.\n` +
      'Run it through the project: "npx petstore …" or "npm start" use the Node.js that "npm ci" installed.\n',
  )
  process.exit(1)
}
const args = process.argv.slice(2)

// Memory (docs/decisions.md, "Memory under load"): V8 lets the young generation grow to 64 MB
// (two 32 MB semi-spaces) under load, and a server's garbage is short-lived, so `serve` caps each
// semi-space at 4 MB: RSS under load 155–176 → 136–145 MB, with no more CPU per request
// (measured side by side, scripts/bench/ab.ts). V8 reads the flag only when the process starts,
// so `serve` re-executes itself with it, in place (process.execve: the same pid, stdio, parent
// and signals, for the operator and for the npm launcher check below). Not done when the
// operator chose a size (on the command line or in NODE_OPTIONS), nor where execve is missing
// (Windows): the service runs there with V8's default.
const SEMI_SPACE_FLAG = '--max-semi-space-size'
const SEMI_SPACE_MB = 4
const semiSpaceChosen =
  process.execArgv.some((arg) => arg.startsWith(SEMI_SPACE_FLAG)) ||
  (process.env.NODE_OPTIONS ?? '').includes(SEMI_SPACE_FLAG)
if (args[0] === 'serve' && !semiSpaceChosen && typeof process.execve === 'function') {
  process.execve(
    process.execPath,
    [
      process.execPath,
      `${SEMI_SPACE_FLAG}=${SEMI_SPACE_MB}`,
      ...process.execArgv,
      process.argv[1] ?? '',
      ...args,
    ],
    process.env,
  )
}
// Node's compile cache (in the system's temporary folder unless NODE_COMPILE_CACHE names
// another; NODE_DISABLE_COMPILE_CACHE=1 turns it off) keeps each module as compiled, and for our
// TypeScript the type-stripped source too. From the second start on, Node's TypeScript loader (a
// WebAssembly module) is not loaded at all: a started server's RSS 110 → 91 MB, `petstore --help`
// half the CPU (measured; docs/decisions.md, "Memory under load"). The first start after an
// install or an upgrade fills it.
const { enableCompileCache } = await import('node:module')
enableCompileCache?.()
// Started by npm (npx, which sets npm_lifecycle_event for what it runs), the server must not
// outlive its launcher (D11; src/cli/npm-launcher.ts).
if (args[0] === 'serve' && process.env.npm_lifecycle_event !== undefined) {
  const { drainWhenLauncherEnds } = await import('../src/cli/npm-launcher.ts')
  drainWhenLauncherEnds()
}
const { main } = await import('../src/cli/petstore.ts')
const code = await main(args)
// A command that failed ends here. A serve that could not listen has started parts (an open
// store, shutdown handlers that would exit 0 once the event loop empties, a cluster worker's
// channel to its primary) that would otherwise keep the process alive or change its exit code.
if (code !== 0) process.exit(code)
