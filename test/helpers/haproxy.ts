// HAProxy for the fleet tests: a private instance in front of a fleet's instances, with the
// configuration docs/fleet.md gives operators, health-checking /readyz, on a
// free port, its config in a temp folder, stopped at the end.
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { debianProgram } from './debian-program.ts'
import { freePort } from './free-port.ts'

/** CI sets this: a missing HAProxy then fails the run instead of skipping its tests. */
export const HAPROXY_REQUIRED = process.env.PETSTORE_REQUIRE_HAPROXY === '1'

/** Debian's, unless PETSTORE_HAPROXY names another. */
const haproxy = debianProgram({
  name: 'haproxy',
  candidates: ['/usr/sbin/haproxy', '/usr/bin/haproxy'],
  override: process.env.PETSTORE_HAPROXY,
  absent: 'HAProxy is not installed (Debian package haproxy); the fleet tests are skipped',
  required: { variable: 'PETSTORE_REQUIRE_HAPROXY', set: HAPROXY_REQUIRED },
})

export const haproxyBinary = haproxy.binary
export const haproxySkipReason = haproxy.skipReason

export interface Backend {
  name: string
  /** host:port of one instance. */
  address: string
}

/**
 * The configuration of docs/fleet.md, for a balancer on `listen` in front of
 * `servers`. Why each line is there:
 * - `option httpchk GET /readyz`, every 250 ms, out after two failures, each check given 1 s:
 *   an instance that drains (D11: /readyz turns 503 and the listener closes at once) or has lost
 *   its database leaves the rotation within half a second, and one slow answer on a busy
 *   machine does not take it out; back after one success.
 * - `retries`, `option redispatch`: a connection refused (an instance between its drain and the
 *   next health check, or killed) is tried again on another instance; nothing was sent, so it
 *   is safe for every request.
 * - `retry-on conn-failure empty-response`: a request whose instance died before answering is
 *   sent again elsewhere, but only a request that is safe to repeat: a read,
 *   or a create carrying an `Idempotency-Key` (D14: the service replays it instead of making a
 *   second pet); `disable-l7-retry` keeps every other request from being sent twice.
 * - Idle connections: HAProxy reuses its connections to the instances and closes an idle one
 *   after `pool-purge-delay` (5 s); the instances keep one for 72 s, so HAProxy is the side that
 *   gives up first and never sends a request on a connection the instance is closing.
 * - `maxconn 4000`: HAProxy needs about twice as many file descriptors, 8,000, and refuses to
 *   start where it cannot have them.
 * - `maxconn 100` per instance, `timeout queue 5s`: more requests than that wait in HAProxy's
 *   queue, not in the instance's accept queue. Node accepts one connection per turn of its
 *   event loop, so 2,000 connections opened at an instance at once take it seconds to accept,
 *   and a health probe that arrives behind them waits as long (D20). A request queued 5 s gets
 *   HAProxy's 503, which the SDK retries.
 * - `option forwardfor`: the client's address in `X-Forwarded-For`, which instances read when
 *   PETSTORE_TRUSTED_PROXIES names HAProxy (the request log's `client`).
 * - `http-error status 503`: HAProxy's own 503 (no instance ready, as when the database is gone
 *   and every /readyz says so, or a request queued too long) in the interface's Error body with
 *   `Retry-After`, as an instance's own 503 is, so that clients retry it paced and parse it.
 * - `stats socket`: where an operator (and the fleet harness) reads HAProxy's counters, its
 *   retries and redispatches among them; Debian's default path.
 */
/** HAProxy's own 503, as the interface's Error body (docs/fleet.md). */
const NO_INSTANCE_BODY = JSON.stringify({
  code: 'unavailable',
  message: 'No instance can answer now; retry later',
  status: 503,
})

export function haproxyConfig(
  listen: string,
  servers: readonly Backend[],
  statsSocket = '/run/haproxy/admin.sock',
): string {
  return `global
    maxconn 4000
    stats socket ${statsSocket} mode 660 level admin

defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    timeout http-request 10s
    timeout http-keep-alive 10s
    timeout queue 5s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response
    option forwardfor

frontend petstore
    bind ${listen}
    default_backend petstore

backend petstore
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    http-request disable-l7-retry if !METH_GET !METH_HEAD !{ req.hdr(idempotency-key) -m found }
    timeout check 1s
    default-server check inter 250ms fall 2 rise 1 pool-purge-delay 5s maxconn 100
    http-error status 503 content-type application/json string '${NO_INSTANCE_BODY}' hdr retry-after 1
${servers.map((s) => `    server ${s.name} ${s.address}`).join('\n')}
`
}

/** The backend's counters, from `show stat` on the stats socket (HAProxy's CSV names). */
export interface BackendStats {
  /** Requests sent again to the same instance after a failed attempt (wretr). */
  retries: number
  /** Requests sent again to another instance (wredis). */
  redispatches: number
  /** Answers with a 5xx status, HAProxy's own 503s included (hrsp_5xx). */
  responses5xx: number
  /** The most requests that waited in HAProxy's queue at once (qmax). */
  queueMax: number
}

export interface HAProxy {
  url: string
  log(): string
  /** The `petstore` backend's counters since start (its maxima since clearMaxima()). */
  stats(): Promise<BackendStats>
  /** Starts the maxima (qmax and the like) afresh; totals keep counting. */
  clearMaxima(): Promise<void>
  stop(): Promise<void>
}

/** Sends one command to HAProxy's stats socket and resolves with its whole answer. */
function askSocket(path: string, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(path)
    let answer = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk) => {
      answer += chunk
    })
    socket.setTimeout(5_000, () => socket.destroy(new Error(`no answer to "${command}"`)))
    socket.once('error', reject)
    socket.once('end', () => resolve(answer))
    socket.once('connect', () => socket.write(`${command}\n`))
  })
}

function backendStats(csv: string): BackendStats {
  const [header = '', ...rows] = csv.trim().split('\n')
  const names = header.replace(/^# /, '').split(',')
  const row = rows
    .map((line) => line.split(','))
    .find((f) => f[0] === 'petstore' && f[1] === 'BACKEND')
  if (row === undefined) throw new Error(`no petstore backend in HAProxy's stats:\n${csv}`)
  const field = (name: string) => {
    const at = names.indexOf(name)
    if (at < 0) throw new Error(`HAProxy's stats have no ${name} column`)
    return Number(row[at] || 0)
  }
  return {
    retries: field('wretr'),
    redispatches: field('wredis'),
    responses5xx: field('hrsp_5xx'),
    queueMax: field('qmax'),
  }
}

/**
 * Starts HAProxy in the foreground (-db) with haproxyConfig on a free port; resolves once an
 * instance answers through it, or, with `instanceUp: false`, once HAProxy answers at all.
 */
export async function startHAProxy(
  servers: readonly Backend[],
  { instanceUp = true } = {},
): Promise<HAProxy> {
  const binary = haproxyBinary()
  if (binary === undefined) throw new Error(haproxy.absentLine())
  const dir = mkdtempSync(join(tmpdir(), 'petstore-haproxy-'))
  const port = await freePort()
  const file = join(dir, 'haproxy.cfg')
  const socket = join(dir, 'admin.sock')
  writeFileSync(file, haproxyConfig(`127.0.0.1:${port}`, servers, socket))
  const child: ChildProcess = spawn(binary, ['-db', '-f', file], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let log = ''
  const keep = (chunk: Buffer) => {
    log = (log + chunk).slice(-64_000)
  }
  child.stdout?.on('data', keep)
  child.stderr?.on('data', keep)
  const exited = once(child, 'exit')
  const url = `http://127.0.0.1:${port}`
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    await exited
    rmSync(dir, { recursive: true, force: true })
  }
  const deadline = Date.now() + 10_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`haproxy exited:\n${log}`)
    const answered = await fetch(`${url}/healthz`).then(
      (r) => r.status === 200 || !instanceUp,
      () => false,
    )
    if (answered) break
    if (Date.now() > deadline) {
      await stop()
      throw new Error(`haproxy did not answer:\n${log}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return {
    url,
    log: () => log,
    stats: async () => backendStats(await askSocket(socket, 'show stat')),
    clearMaxima: async () => {
      await askSocket(socket, 'clear counters')
    },
    stop,
  }
}
