// The Patroni reference topology of deploy/patroni, run on one machine: three etcd members, three
// PostgreSQL members under Patroni, HAProxy sending connections to the leader, PgBouncer in front
// of HAProxy (D30). Every part is started from the files an operator copies, read as they are;
// only what cannot be the same on one machine is changed, and nothing else: each example address
// (10.0.0.11–13 and their ports) becomes 127.0.0.1 on a free port, the example network
// 10.0.0.0/24 becomes 127.0.0.1/32, and data and auth files go to a temp folder.
//
// The faults an operator lives through are here as methods (a switchover, a postmaster killed, a
// machine lost, etcd members stopped), each done the way it happens for real: by patronictl or a
// signal, never by promoting a server or rewriting a pooler's target ourselves.
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { freePort } from '../../test/helpers/free-port.ts'
import { haproxyBinary } from '../../test/helpers/haproxy.ts'
import { pgbouncerBinary } from '../../test/helpers/pgbouncer.ts'
import { onDatabase } from '../../test/helpers/postgres.ts'

const execFileAsync = promisify(execFile)
const DEPLOY = join(import.meta.dirname, '../../deploy/patroni')
export const MEMBERS = 3
/** The role the service runs as, its password in this run, and its database. */
export const SERVICE_ROLE = 'petstore'
const SERVICE_PASSWORD = 'petstore-fleet'
const DATABASE = 'petstore'

export interface Member {
  name: string
  pgPort: number
  apiPort: number
}

/** A member as Patroni's REST API lists it in GET /cluster. */
interface ClusterMember {
  name: string
  role: 'leader' | 'sync_standby' | 'replica' | string
  state: string
  timeline?: number
}

export interface PatroniCluster {
  members: Member[]
  /** The service's DATABASE_URL: its role, through PgBouncer, in transaction mode (D19). */
  serviceUrl: string
  /** The superuser, through HAProxy, to the leader: for migrations and checks. */
  ownerUrl: string
  /** GET /cluster of the first member that answers. */
  cluster(): Promise<ClusterMember[]>
  /**
   * Resolves with the leader's name once one leads with a synchronous standby, other than
   * `notLeader` when given (a lost leader keeps its lock until ttl runs out).
   */
  settled(options?: { timeoutMs?: number; notLeader?: string }): Promise<string>
  /** The pid in `member`'s postmaster.pid while that process lives, else undefined. */
  postmasterPid(member: string): number | undefined
  /** `patronictl switchover` from the leader to `candidate` (the sync standby unless given). */
  switchover(candidate?: string): Promise<void>
  /** SIGKILL of `member`'s postmaster, resolved once it is gone; its Patroni stays and acts. */
  killPostmaster(member: string): Promise<number>
  /** SIGKILL of `member`'s Patroni and PostgreSQL together, as when its machine is lost. */
  loseMachine(member: string): Promise<void>
  /** Starts `member`'s Patroni again (after loseMachine): it rejoins as a replica. */
  startMember(member: string): void
  /** Stops etcd member `index` (0-based) at once; startEtcd brings it back. */
  stopEtcd(index: number): Promise<void>
  startEtcd(index: number): void
  /** Resolves once etcd member `index` says it is healthy (it has a quorum). */
  etcdHealthy(index: number, timeoutMs?: number): Promise<void>
  /** SIGKILL of PgBouncer, then started again on the same port with the same files. */
  restartPgBouncer(): Promise<void>
  /** What a part wrote so far: `patroni:member1`, `etcd:0`, `haproxy`, `pgbouncer`. */
  log(part: string): string
  stop(): Promise<void>
}

// --- the files, made local ------------------------------------------------------------------

/** Example address → local address, applied to every file read from deploy/patroni. */
type Addresses = Map<string, string>

function localise(text: string, addresses: Addresses): string {
  let out = text.replaceAll('10.0.0.0/24', '127.0.0.1/32')
  for (const [example, local] of addresses) out = out.replaceAll(example, local)
  return out
}

/** `NAME=value` lines of an env file (comments and blank lines skipped). */
function envFile(text: string): Record<string, string> {
  const env: Record<string, string> = {}
  for (const line of text.split('\n')) {
    const match = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim())
    if (match) env[match[1] as string] = match[2] as string
  }
  return env
}

const deployed = (name: string) => readFileSync(join(DEPLOY, name), 'utf8')

/** PostgreSQL's programs, where patroni.yml's `bin_dir` says they are (Debian's PostgreSQL 15). */
export const PG_BIN = /^\s*bin_dir:\s*(\S+)/m.exec(deployed('patroni.yml'))?.[1] ?? ''

/** The example host of member `i` (0-based): 10.0.0.11, .12, .13. */
const exampleHost = (i: number) => `10.0.0.1${i + 1}`

// --- processes ----------------------------------------------------------------------------

/** PostgreSQL, Patroni and PgBouncer refuse to run as root: as root they run as `postgres`. */
function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined
  const id = (flag: string) =>
    Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim())
  return { uid: id('-u'), gid: id('-g') }
}

interface Running {
  child: ChildProcess
  /** The process itself has exited (its children may still hold its output open). */
  exited: Promise<unknown>
}

class Logs {
  readonly #text = new Map<string, string>()
  keep(part: string, child: ChildProcess): void {
    const append = (chunk: Buffer) => {
      this.#text.set(part, ((this.#text.get(part) ?? '') + chunk).slice(-256_000))
    }
    child.stdout?.on('data', append)
    child.stderr?.on('data', append)
  }
  note(part: string, line: string): void {
    this.#text.set(part, `${this.#text.get(part) ?? ''}${line}\n`)
  }
  of(part: string): string {
    return this.#text.get(part) ?? ''
  }
}

function run(
  logs: Logs,
  part: string,
  command: string,
  args: string[],
  options: { env?: Record<string, string>; user?: { uid: number; gid: number } } = {},
): Running {
  const child = spawn(command, args, {
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...options.user,
  })
  logs.keep(part, child)
  // A program that cannot start says so in its log; the wait for it then fails with that log.
  child.once('error', (err) => logs.note(part, String(err)))
  return { child, exited: once(child, 'exit') }
}

async function kill(running: Running | undefined, signal: NodeJS.Signals): Promise<void> {
  if (running === undefined) return
  const { child } = running
  if (child.exitCode === null && child.signalCode === null) child.kill(signal)
  await running.exited
}

/** SIGKILL of `pid` (nothing when undefined or gone), resolved once it no longer runs. */
async function killed(pid: number | undefined): Promise<void> {
  if (pid === undefined) return
  const alive = () => {
    try {
      process.kill(pid, 0)
      return true
    } catch {
      return false
    }
  }
  if (alive()) process.kill(pid, 'SIGKILL')
  while (alive()) await new Promise((resolve) => setTimeout(resolve, 20))
}

/** Resolves with `check`'s first value other than undefined (its errors count as none yet). */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs: number,
) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check().catch(() => undefined)
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

// --- the cluster ----------------------------------------------------------------------------

interface Ports {
  etcdClient: number[]
  etcdPeer: number[]
  members: Member[]
  haproxy: number
  pgbouncer: number
}

async function freePorts(): Promise<Ports> {
  const many = async (n: number) => {
    const ports: number[] = []
    for (let i = 0; i < n; i++) ports.push(await freePort())
    return ports
  }
  const [etcdClient, etcdPeer, pg, api] = [
    await many(3),
    await many(3),
    await many(3),
    await many(3),
  ]
  const members = pg.map((pgPort, i) => ({
    name: `member${i + 1}`,
    pgPort,
    apiPort: api[i] as number,
  }))
  return { etcdClient, etcdPeer, members, haproxy: await freePort(), pgbouncer: await freePort() }
}

/** Each example address:port of the files → 127.0.0.1 and this run's port. */
function addressesOf(ports: Ports): Addresses {
  const addresses: Addresses = new Map()
  for (let i = 0; i < MEMBERS; i++) {
    const host = exampleHost(i)
    const member = ports.members[i] as Member
    addresses.set(`${host}:2379`, `127.0.0.1:${ports.etcdClient[i]}`)
    addresses.set(`${host}:2380`, `127.0.0.1:${ports.etcdPeer[i]}`)
    addresses.set(`${host}:5432`, `127.0.0.1:${member.pgPort}`)
    addresses.set(`${host}:8008`, `127.0.0.1:${member.apiPort}`)
  }
  return addresses
}

/** haproxy.cfg's `check port 8008` names the REST API's port alone: each server line's own. */
function localHAProxyConfig(ports: Ports, addresses: Addresses): string {
  const file = 'haproxy.cfg'
  const cfg = replaced(
    deployed(file),
    'bind 127.0.0.1:5000',
    `bind 127.0.0.1:${ports.haproxy}`,
    file,
  )
  const lines = localise(cfg, addresses).split('\n')
  const servers = lines.map((line) => {
    const server = /^\s*server (member\d)\b/.exec(line)
    const member = ports.members.find((m) => m.name === server?.[1])
    return member === undefined ? line : replaced(line, 'port 8008', `port ${member.apiPort}`, file)
  })
  if (servers.join('\n') === lines.join('\n')) throw new Error(`deploy/patroni/${file}: no servers`)
  return servers.join('\n')
}

/** `text` with `from` replaced, which must be there: a changed file fails here, not later. */
function replaced(text: string, from: string | RegExp, to: string, file: string): string {
  const found = typeof from === 'string' ? text.includes(from) : from.test(text)
  if (!found) throw new Error(`deploy/patroni/${file} no longer has ${from}`)
  return text.replace(from, to)
}

function localPgBouncerConfig(ports: Ports, dir: string): string {
  const file = 'pgbouncer.ini'
  let ini = deployed(file)
  ini = replaced(ini, 'host=127.0.0.1 port=5000', `host=127.0.0.1 port=${ports.haproxy}`, file)
  ini = replaced(ini, 'listen_addr = 0.0.0.0', 'listen_addr = 127.0.0.1', file)
  ini = replaced(ini, 'listen_port = 6432', `listen_port = ${ports.pgbouncer}`, file)
  ini = replaced(ini, '/etc/pgbouncer/userlist.txt', join(dir, 'userlist.txt'), file)
  return `${ini}unix_socket_dir = ${dir}\n`
}

export async function startPatroniCluster(): Promise<PatroniCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-patroni-'))
  const user = postgresUser()
  const own = (path: string) => user && chownSync(path, user.uid, user.gid)
  own(dir)
  const ports = await freePorts()
  const addresses = addressesOf(ports)
  const logs = new Logs()
  const etcd: (Running | undefined)[] = []
  const patroni = new Map<string, Running>()
  let haproxy: Running | undefined
  let pgbouncer: Running | undefined

  const patroniYml = join(dir, 'patroni.yml')
  writeFileSync(patroniYml, localise(deployed('patroni.yml'), addresses))
  own(patroniYml)
  const etcdHosts = ports.etcdClient.map((port) => `127.0.0.1:${port}`).join(',')

  const startEtcd = (i: number) => {
    const env = envFile(localise(deployed(`etcd${i + 1}.env`), addresses))
    env.ETCD_DATA_DIR = join(dir, `etcd${i + 1}`)
    etcd[i] = run(logs, `etcd:${i}`, 'etcd', [], { env })
  }
  const memberEnv = (member: Member) => {
    const i = ports.members.indexOf(member)
    const env = envFile(localise(deployed(`member${i + 1}.env`), addresses))
    // What patroni.yml says for every machine (0.0.0.0:…, one data folder), per member here.
    return {
      ...env,
      PATRONI_RESTAPI_LISTEN: `127.0.0.1:${member.apiPort}`,
      PATRONI_POSTGRESQL_LISTEN: `127.0.0.1:${member.pgPort}`,
      PATRONI_POSTGRESQL_DATA_DIR: join(dir, member.name),
      PATRONI_ETCD3_HOSTS: etcdHosts,
    }
  }
  const memberNamed = (name: string) => {
    const member = ports.members.find((m) => m.name === name)
    if (member === undefined) throw new Error(`no member ${name}`)
    return member
  }
  const startMember = (name: string) => {
    const member = memberNamed(name)
    const env = { ...memberEnv(member), HOME: dir }
    patroni.set(name, run(logs, `patroni:${name}`, 'patroni', [patroniYml], { env, user }))
  }
  const superuserPassword = envFile(deployed('member1.env')).PATRONI_SUPERUSER_PASSWORD
  const ownerUrl = `postgres://postgres:${superuserPassword}@127.0.0.1:${ports.haproxy}`
  const serviceUrl = `postgres://${SERVICE_ROLE}:${SERVICE_PASSWORD}@127.0.0.1:${ports.pgbouncer}/${DATABASE}`

  const cluster = async (): Promise<ClusterMember[]> => {
    for (const member of ports.members) {
      const answer = await fetch(`http://127.0.0.1:${member.apiPort}/cluster`).catch(
        () => undefined,
      )
      if (answer?.ok) return ((await answer.json()) as { members: ClusterMember[] }).members
    }
    throw new Error('no Patroni member answers')
  }
  const settled = ({ timeoutMs = 60_000, notLeader = '' } = {}) =>
    until(
      'a leader with a synchronous standby',
      async () => {
        const members = await cluster()
        const leader = members.find(
          (m) => m.role === 'leader' && m.state === 'running' && m.name !== notLeader,
        )
        const sync = members.some((m) => m.role === 'sync_standby' && m.state !== 'stopped')
        return leader !== undefined && sync ? leader.name : undefined
      },
      timeoutMs,
    )
  const postmasterPid = (name: string): number | undefined => {
    try {
      const pid = Number(readFileSync(join(dir, name, 'postmaster.pid'), 'utf8').split('\n')[0])
      process.kill(pid, 0)
      return pid
    } catch {
      return undefined
    }
  }

  const startPgBouncer = () => {
    const ini = join(dir, 'pgbouncer.ini')
    pgbouncer = run(logs, 'pgbouncer', pgbouncerBinary() ?? 'pgbouncer', [ini], { user })
  }

  const stop = async () => {
    await kill(pgbouncer, 'SIGKILL')
    await kill(haproxy, 'SIGTERM')
    // Patroni stops its PostgreSQL on SIGTERM; a postmaster left by a lost member is killed.
    await Promise.all([...patroni.values()].map((p) => kill(p, 'SIGTERM')))
    for (const member of ports.members) await killed(postmasterPid(member.name))
    await Promise.all(etcd.map((e) => kill(e, 'SIGTERM')))
    rmSync(dir, { recursive: true, force: true })
  }

  try {
    for (let i = 0; i < MEMBERS; i++) startEtcd(i)
    for (const member of ports.members) startMember(member.name)
    const haproxyCfg = join(dir, 'haproxy.cfg')
    writeFileSync(haproxyCfg, localHAProxyConfig(ports, addresses))
    haproxy = run(logs, 'haproxy', haproxyBinary() ?? 'haproxy', ['-db', '-f', haproxyCfg])
    await settled({ timeoutMs: 90_000 })
    await until(
      'HAProxy to the leader',
      () => onDatabase(`${ownerUrl}/postgres`, async () => true),
      30_000,
    )
    await prepareDatabase(ownerUrl, dir, own)
    writeFileSync(join(dir, 'pgbouncer.ini'), localPgBouncerConfig(ports, dir))
    own(join(dir, 'pgbouncer.ini'))
    startPgBouncer()
    await until('PgBouncer', () => onDatabase(serviceUrl, async () => true), 20_000)
  } catch (err) {
    const parts = ['haproxy', 'pgbouncer', ...ports.members.map((m) => `patroni:${m.name}`)]
    const tails = parts.map((part) => `--- ${part}\n${logs.of(part).slice(-3_000)}`).join('\n')
    await stop()
    throw new Error(`the Patroni cluster did not start: ${err}\n${tails}`)
  }

  return {
    members: ports.members,
    serviceUrl,
    ownerUrl: `${ownerUrl}/${DATABASE}`,
    cluster,
    settled,
    async switchover(candidate) {
      // Both named at once: a standby is named synchronous again a moment after the cluster
      // settles (after etcd's quorum came back, say), so the pair is waited for, not assumed.
      const [leader, to] = await until(
        'a leader and a candidate for the switchover',
        async () => {
          const members = await cluster()
          const from = members.find((m) => m.role === 'leader' && m.state === 'running')?.name
          const sync = members.find((m) => m.role === 'sync_standby' && m.state !== 'stopped')
          const next = candidate ?? sync?.name
          return from !== undefined && next !== undefined ? [from, next] : undefined
        },
        60_000,
      )
      const args = ['-c', patroniYml, 'switchover', '--leader', leader, '--candidate', to]
      // Not execFileSync: the caller's users go on calling while patronictl waits.
      await execFileAsync('patronictl', [...args, '--force'], {
        env: { ...process.env, PATRONI_ETCD3_HOSTS: etcdHosts, HOME: dir },
        ...user,
      })
    },
    postmasterPid,
    async killPostmaster(member) {
      const pid = postmasterPid(member)
      if (pid === undefined) throw new Error(`${member}'s PostgreSQL is not running`)
      await killed(pid)
      return pid
    },
    async loseMachine(member) {
      const postmaster = postmasterPid(member)
      await Promise.all([kill(patroni.get(member), 'SIGKILL'), killed(postmaster)])
    },
    startMember,
    async stopEtcd(index) {
      await kill(etcd[index], 'SIGKILL')
    },
    startEtcd,
    async etcdHealthy(index, timeoutMs = 30_000) {
      const url = `http://127.0.0.1:${ports.etcdClient[index]}/health`
      await until(
        `etcd member ${index} healthy`,
        async () => {
          const health = (await (await fetch(url)).json()) as { health?: string }
          return health.health === 'true' ? true : undefined
        },
        timeoutMs,
      )
    },
    async restartPgBouncer() {
      await kill(pgbouncer, 'SIGKILL')
      startPgBouncer()
      await until('PgBouncer again', () => onDatabase(serviceUrl, async () => true), 20_000)
    },
    log: (part) => logs.of(part),
    stop,
  }
}

/**
 * What an operator does once, on the leader: the service's role and database, and PgBouncer's
 * auth_file with the role's SCRAM secret (pgbouncer.ini). `petstore migrate` and grants.sql come
 * after, as docs/operations.md says.
 */
async function prepareDatabase(
  ownerUrl: string,
  dir: string,
  own: (path: string) => unknown,
): Promise<void> {
  const secret = await onDatabase(`${ownerUrl}/postgres`, async (client) => {
    await client.query(`CREATE ROLE ${SERVICE_ROLE} LOGIN PASSWORD '${SERVICE_PASSWORD}'`)
    await client.query(`CREATE DATABASE ${DATABASE}`)
    const { rows } = await client.query<{ rolpassword: string }>(
      'SELECT rolpassword FROM pg_authid WHERE rolname = $1',
      [SERVICE_ROLE],
    )
    return rows[0]?.rolpassword
  })
  if (secret === undefined) throw new Error(`no SCRAM secret for ${SERVICE_ROLE}`)
  const userlist = join(dir, 'userlist.txt')
  writeFileSync(userlist, `"${SERVICE_ROLE}" "${secret}"\n`, { mode: 0o600 })
  own(userlist)
}
