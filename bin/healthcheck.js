#!/usr/bin/env node
// The image's HEALTHCHECK (Dockerfile): asks the probe listener (PROBE_PORT, answered on a thread
// of its own, D20) for /healthz, or the path given (`healthcheck.js /readyz`), and exits 0 on a
// 200, 1 on anything else or after 2 s. With PROBE_PORT off it asks the API's port instead, as
// the service reads the settings (src/config.ts: an empty PROBE_HOST is HOST's). Plain JavaScript
// that imports nothing of the project, so that a check is one small Node.js process, and the
// image needs no curl.
const TIMEOUT_MS = 2000
const path = process.argv[2] ?? '/healthz'
const setting = (name) => process.env[name]?.trim() || undefined

const probePort = setting('PROBE_PORT')
const onProbePort = probePort !== undefined && probePort.toLowerCase() !== 'off'
const port = onProbePort ? probePort : (setting('PORT') ?? '8080')
if (!/^\d+$/.test(port)) {
  process.stderr.write(`healthcheck: the port to ask is "${port}", not a number\n`)
  process.exit(1)
}
// The listener is reached over loopback whatever address it is bound to, unless it is bound to
// one address only.
const bound = (onProbePort ? setting('PROBE_HOST') : undefined) ?? setting('HOST') ?? '127.0.0.1'
const host = bound === '0.0.0.0' || bound === '::' ? '127.0.0.1' : bound
const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}${path}`

try {
  const response = await fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS) })
  await response.body?.cancel()
  if (response.status !== 200)
    process.stderr.write(`healthcheck: ${url} answered ${response.status}\n`)
  process.exit(response.status === 200 ? 0 : 1)
} catch (err) {
  process.stderr.write(`healthcheck: ${url}: ${err instanceof Error ? err.message : err}\n`)
  process.exit(1)
}
