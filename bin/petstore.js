#!/usr/bin/env node
// Entry point of the `petstore` command. Plain JavaScript so that it can say clearly when the
// Node.js running it is too old: the project's own install brings Node.js 26 (npx petstore …,
// npm start), and the source is TypeScript run by Node's type stripping; 24 is the oldest line
// `engines` in package.json names.
const major = Number(process.versions.node.split('.')[0])
if (major < 24) {
  process.stderr.write(
    `petstore needs Node.js 24 or later; this is ${process.version}.\n` +
      'Run it through the project: "npx petstore …" or "npm start" use the Node.js that "npm ci" installed.\n',
  )
  process.exit(1)
}
const args = process.argv.slice(2)

// Memory (D25, docs/decisions/D25-memory-under-load.md): V8 lets the young generation grow to 64 MB
// (two 32 MB semi-spaces) under load, and a server's garbage is short-lived, so `serve` caps each
// semi-space at 4 MB: RSS under load 155–176 → 136–145 MB, with no more CPU per request
// (measured side by side, npm run bench -- ab). V8 reads the flag only when the process starts,
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
// Node's compile cache keeps each module as compiled, and for our TypeScript the type-stripped
// source too. From the second start on, Node's TypeScript loader (a WebAssembly module) is not
// loaded at all: less memory once started and half the CPU for `petstore --help`
// (docs/benchmarks.md). What the cache holds is run as our code, so it lives in a folder only
// this user can write: NODE_COMPILE_CACHE's when set (Node itself enables it then), else one of
// ours in the temporary folder, created 0700 and used only if it is a folder this user owns that
// no one else may enter (another local user could otherwise plant code in a shared one).
// NODE_DISABLE_COMPILE_CACHE=1 turns it off.
if (process.env.NODE_COMPILE_CACHE === undefined && !process.env.NODE_DISABLE_COMPILE_CACHE) {
  const folder = await privateCompileCache()
  if (folder !== undefined) {
    const { enableCompileCache } = await import('node:module')
    enableCompileCache?.(folder)
  }
}

/** `<tmp>/petstore-compile-cache-<uid>`, if it is this user's alone; undefined otherwise. */
async function privateCompileCache() {
  if (typeof process.getuid !== 'function') return undefined // Windows: no cache
  const [{ lstatSync, mkdirSync }, { tmpdir }, { join }] = await Promise.all([
    import('node:fs'),
    import('node:os'),
    import('node:path'),
  ])
  const uid = process.getuid()
  const folder = join(tmpdir(), `petstore-compile-cache-${uid}`)
  try {
    mkdirSync(folder, { mode: 0o700 })
  } catch (err) {
    if (err?.code !== 'EEXIST') return undefined
  }
  try {
    const found = lstatSync(folder)
    const ours = found.isDirectory() && found.uid === uid && (found.mode & 0o077) === 0
    return ours ? folder : undefined
  } catch {
    return undefined
  }
}
// Tracing (D23), only for `serve` with an OTLP endpoint set: started here, before anything it
// traces is loaded. Without an endpoint nothing of OpenTelemetry is loaded at all. Not in the
// primary of `serve --workers`, which serves nothing; each worker starts its own. A bad OTEL_
// value is left for the command to report, as any other configuration error.
if (args[0] === 'serve') {
  const { ConfigError, loadConfig, tracingWanted } = await import('../src/config.ts')
  if (tracingWanted(process.env) && !(await clusterPrimary())) {
    let config
    try {
      config = loadConfig(process.env)
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err
    }
    if (config?.tracing !== undefined) {
      const { startTracing } = await import('../src/observability/tracing/start.ts')
      startTracing(config, config.tracing)
    }
  }
}

/** The primary of `serve --workers`: the process that forks the workers. */
async function clusterPrimary() {
  const workers = args.some((arg) => arg === '--workers' || arg.startsWith('--workers='))
  if (!workers) return false
  const { default: cluster } = await import('node:cluster')
  return cluster.isPrimary
}
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
