// Why PostgreSQL would not let the service in, as one line an operator can act on: what is
// wrong with DATABASE_URL or the server, and what to do. Used where a command first connects
// (the migrations every command runs first), so that `serve`, `serve --workers`, `migrate` and
// `keys …` all end with that line and exit 1 instead of a driver's stack (docs/operations.md). The line never carries the URL's password: only host, port, database and role.
//
// The SQLSTATEs are PostgreSQL's connection-time ones (Appendix A of its manual: classes 28,
// 3D, 42, 53, 55, 57), as the server or a pooler in front of it sends them; the rest are the
// driver's and Node's TLS and socket errors, which carry no SQLSTATE.
import { StoreOpenError, StoreUnavailableError } from '../store.ts'

/** Where the service tried to connect: pg's client knows it once DATABASE_URL is parsed. */
export interface ConnectTarget {
  host: string
  port: number
  database: string
  user: string
}

interface Failure {
  code?: unknown
  message?: unknown
}

/** host:port, an IPv6 address in brackets; a Unix socket folder as itself. */
export function address({ host, port }: Pick<ConnectTarget, 'host' | 'port'>): string {
  if (host.startsWith('/')) return `the socket in ${host}`
  return `${host.includes(':') ? `[${host}]` : host}:${port}`
}

/** The options createdb and createuser need to reach the same server. */
function clientOptions(target: ConnectTarget): string {
  return `-h ${target.host} -p ${target.port}`
}

/** A name as PostgreSQL quotes it in its messages. */
function quoted(name: string): string {
  return `"${name}"`
}

type Explain = (target: ConnectTarget, message: string) => string

// 28000 invalid_authorization_specification covers several refusals; the server's words say which.
const AUTHORIZATION: [RegExp, Explain][] = [
  [
    /^role ".*" does not exist/,
    (t) =>
      `there is no role ${quoted(t.user)}; create it (createuser ${clientOptions(t)} ${t.user}) or name another user in DATABASE_URL`,
  ],
  [
    /is not permitted to log in/,
    (t) =>
      `the role ${quoted(t.user)} may not log in; allow it (ALTER ROLE ${quoted(t.user)} LOGIN) or name another user in DATABASE_URL`,
  ],
  [
    /^no pg_hba\.conf entry/,
    (t, message) =>
      `the server's pg_hba.conf lets no connection in for role ${quoted(t.user)} and database ${quoted(t.database)} from this host${/no encryption|SSL off/.test(message) ? ' without TLS' : ''}; add a line for them to pg_hba.conf${/no encryption|SSL off/.test(message) ? ', or add sslmode=verify-full to DATABASE_URL if the server only allows TLS' : ''}`,
  ],
]

/** Refusals that stay until someone changes DATABASE_URL or the server: each explained. */
function permanent(code: string, message: string, target: ConnectTarget): string | undefined {
  switch (code) {
    case '3D000':
      return `there is no database ${quoted(target.database)}; create it (createdb ${clientOptions(target)} ${target.database}) or name another in DATABASE_URL`
    case '28P01':
      return `the password for role ${quoted(target.user)} was refused; check the password in DATABASE_URL`
    case '28000': {
      const match = AUTHORIZATION.find(([pattern]) => pattern.test(message))
      return match
        ? match[1](target, message)
        : `the server refused role ${quoted(target.user)}: ${message}`
    }
    case '42501':
      return `the role ${quoted(target.user)} may not connect to database ${quoted(target.database)}; grant it (GRANT CONNECT ON DATABASE ${quoted(target.database)} TO ${quoted(target.user)})`
    case '55000':
      return `the database ${quoted(target.database)} does not accept connections (ALTER DATABASE ${quoted(target.database)} ALLOW_CONNECTIONS true)`
    default:
      return undefined
  }
}

/** The driver's and Node's own errors (no SQLSTATE) that no retry will change. */
function permanentClientSide(
  code: string,
  message: string,
  target: ConnectTarget,
): string | undefined {
  if (message.startsWith('SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be')) {
    return `the server asks for a password for role ${quoted(target.user)} and DATABASE_URL gives none (postgres://user:password@host/database)`
  }
  if (message === 'The server does not support SSL connections') {
    return 'TLS was asked for (sslmode) but the server does not offer it; turn ssl on in the server or take sslmode out'
  }
  // Node's TLS verification: https://nodejs.org/api/tls.html#x509-certificate-error-codes
  if (
    code === 'SELF_SIGNED_CERT_IN_CHAIN' ||
    code === 'DEPTH_ZERO_SELF_SIGNED_CERT' ||
    code === 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' ||
    code === 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY'
  ) {
    return `the server's TLS certificate is not signed by a trusted authority (${code}); name its CA with sslrootcert=FILE in DATABASE_URL`
  }
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return `the server's TLS certificate is not for host ${target.host}; connect by a name the certificate lists`
  }
  if (code === 'CERT_HAS_EXPIRED') return "the server's TLS certificate has expired; renew it"
  if (message.startsWith('SASL: Only mechanism')) {
    return `the server asks for an authentication method the driver lacks (${message})`
  }
  return undefined
}

/** Refusals a later try may outlive; the start still fails, with a line saying why. */
function transient(code: string, message: string): string | undefined {
  switch (code) {
    case '53300':
      return `the server has no connection left (${message}); raise max_connections or the role's or database's limit, or lower DATABASE_POOL_SIZE`
    case '57P03':
      return `the server is not accepting connections now (${message}); retry once it is up`
    case 'ECONNREFUSED':
      return 'nothing accepts connections there; is PostgreSQL running, and listening on that address and port?'
    case 'ENOTFOUND':
      return 'the host name does not resolve'
    case 'EAI_AGAIN':
      return 'the host name could not be resolved; the resolver did not answer'
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'the host cannot be reached from here'
    case 'ECONNRESET':
      return 'the connection was cut while it opened (a TLS or pooler setting?)'
  }
  if (
    message === 'timeout expired' ||
    message.startsWith('Connection terminated due to connection timeout')
  ) {
    return 'no answer within the connect timeout; is a firewall dropping the connection?'
  }
  // PgBouncer's words for a database it does not list (08P01 like its other refusals).
  if (/^no such database/.test(message)) return `the pooler lists no such database (${message})`
  return undefined
}

/**
 * The failure of a first connection as one line naming DATABASE_URL: a StoreOpenError for what
 * only a change of settings fixes, a StoreUnavailableError for what may pass; undefined when
 * `err` is not a failure to connect (a migration's own error, say).
 */
export function explainConnectFailure(
  err: unknown,
  target: ConnectTarget,
): StoreOpenError | StoreUnavailableError | undefined {
  const { code: rawCode, message: rawMessage } = (err ?? {}) as Failure
  const code = typeof rawCode === 'string' ? rawCode : ''
  const message = typeof rawMessage === 'string' ? rawMessage : ''
  const where = `cannot connect to PostgreSQL at ${address(target)} as ${quoted(target.user)} (DATABASE_URL)`
  const fixed = permanent(code, message, target) ?? permanentClientSide(code, message, target)
  if (fixed !== undefined) return new StoreOpenError(`${where}: ${fixed}`)
  const passing = transient(code, message)
  if (passing !== undefined) return new StoreUnavailableError(`${where}: ${passing}`)
  return undefined
}
