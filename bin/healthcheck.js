#!/usr/bin/env node
// The image's HEALTHCHECK (Dockerfile): asks the probe listener (PROBE_PORT, answered on a thread
// of its own, D20) for /healthz, or the path given (`healthcheck.js /readyz`), and exits 0 on a
// 200, 1 on anything else or after 2 s. Plain JavaScript that imports nothing of the project, so
// that it costs a container one small Node.js process per check, and needs no curl in the image.
const TIMEOUT_MS = 2000
const port = process.env.PROBE_PORT
const path = process.argv[2] ?? '/healthz'

if (port === undefined || !/^\d+$/.test(port)) {
  process.stderr.write(`healthcheck: PROBE_PORT is ${port ?? 'unset'}; it must be the probe port\n`)
  process.exit(1)
}
// The listener is reached over loopback whatever address it is bound to, unless it is bound to
// one address only (PROBE_HOST, else HOST, as the service reads them).
const bound = process.env.PROBE_HOST ?? process.env.HOST ?? '127.0.0.1'
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
