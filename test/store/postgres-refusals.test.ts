// The line an operator reads when PostgreSQL will not let a command in (src/store/postgres/refusals.ts).
// The refusals this machine's server gives for real (no such database, no such role, nothing
// listening) are run end to end in test/cli.test.ts; here every other one
// PostgreSQL, a pooler, the driver or Node's TLS can give at connection time, as the driver
// hands it over: a code and the server's words.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { explainConnectFailure } from '../../src/store/postgres/refusals.ts'
import { StoreOpenError, StoreUnavailableError } from '../../src/store/store.ts'

const target = { host: 'db.internal', port: 5433, database: 'petstore', user: 'app' }
const where = 'cannot connect to PostgreSQL at db.internal:5433 as "app" (DATABASE_URL): '

function failure(code: string | undefined, message: string): Error {
  return Object.assign(new Error(message), code === undefined ? {} : { code })
}

test('refusals only a change of settings fixes: StoreOpenError, with what to do', () => {
  const cases: [string | undefined, string, string][] = [
    [
      '3D000',
      'database "petstore" does not exist',
      'there is no database "petstore"; create it (createdb -h db.internal -p 5433 petstore) or name another in DATABASE_URL',
    ],
    [
      '28000',
      'role "app" does not exist',
      'there is no role "app"; create it (createuser -h db.internal -p 5433 app) or name another user in DATABASE_URL',
    ],
    [
      '28P01',
      'password authentication failed for user "app"',
      'the password for role "app" was refused; check the password in DATABASE_URL',
    ],
    [
      '28000',
      'role "app" is not permitted to log in',
      'the role "app" may not log in; allow it (ALTER ROLE "app" LOGIN) or name another user in DATABASE_URL',
    ],
    [
      '28000',
      'no pg_hba.conf entry for host "10.0.0.5", user "app", database "petstore", no encryption',
      `the server's pg_hba.conf lets no connection in for role "app" and database "petstore" from this host without TLS; add a line for them to pg_hba.conf, or add sslmode=verify-full to DATABASE_URL if the server only allows TLS`,
    ],
    [
      '42501',
      'permission denied for database "petstore"',
      'the role "app" may not connect to database "petstore"; grant it (GRANT CONNECT ON DATABASE "petstore" TO "app")',
    ],
    [
      '55000',
      'database "petstore" is not currently accepting connections',
      'the database "petstore" does not accept connections (ALTER DATABASE "petstore" ALLOW_CONNECTIONS true)',
    ],
    [
      undefined,
      'SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string',
      'the server asks for a password for role "app" and DATABASE_URL gives none (postgres://user:password@host/database)',
    ],
    [
      'SELF_SIGNED_CERT_IN_CHAIN',
      'self-signed certificate in certificate chain',
      "the server's TLS certificate is not signed by a trusted authority (SELF_SIGNED_CERT_IN_CHAIN); name its CA with sslrootcert=FILE in DATABASE_URL",
    ],
    [
      'ERR_TLS_CERT_ALTNAME_INVALID',
      "Hostname/IP does not match certificate's altnames",
      "the server's TLS certificate is not for host db.internal; connect by a name the certificate lists",
    ],
    [
      'CERT_HAS_EXPIRED',
      'certificate has expired',
      "the server's TLS certificate has expired; renew it",
    ],
  ]
  for (const [code, message, expected] of cases) {
    const explained = explainConnectFailure(failure(code, message), target)
    assert.ok(explained instanceof StoreOpenError, `${code} ${message}`)
    assert.equal(explained.message, where + expected)
  }
})

test('refusals that may pass: StoreUnavailableError, saying why', () => {
  const cases: [string | undefined, string, RegExp][] = [
    ['53300', 'sorry, too many clients already', /no connection left .* DATABASE_POOL_SIZE$/],
    [
      '57P03',
      'the database system is starting up',
      /not accepting connections now \(the database system is starting up\)/,
    ],
    ['ECONNREFUSED', 'connect ECONNREFUSED 10.0.0.9:5433', /nothing accepts connections there/],
    ['ENOTFOUND', 'getaddrinfo ENOTFOUND db.internal', /the host name does not resolve$/],
    [undefined, 'timeout expired', /no answer within the connect timeout/],
    ['08P01', 'no such database: petstore', /the pooler lists no such database/],
  ]
  for (const [code, message, expected] of cases) {
    const explained = explainConnectFailure(failure(code, message), target)
    assert.ok(explained instanceof StoreUnavailableError, `${code} ${message}`)
    assert.ok(explained.message.startsWith(where), explained.message)
    assert.match(explained.message, expected)
  }
})

test('a failure that is not a refusal to connect is left as it is', () => {
  assert.equal(
    explainConnectFailure(failure('42P01', 'relation "x" does not exist'), target),
    undefined,
  )
  assert.equal(explainConnectFailure(new Error('something else'), target), undefined)
  assert.equal(explainConnectFailure(undefined, target), undefined)
})
