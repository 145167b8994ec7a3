// D19: PostgreSQL behind a transaction-mode PgBouncer becomes unreachable and comes back, while
// PgBouncer stays up: the same 503s, readiness and recovery as straight to PostgreSQL
// (outage-suite.ts).
import { pgbouncerSkipReason } from '../helpers/pgbouncer.ts'
import { postgresSkipReason } from '../helpers/postgres.ts'
import { outageSuite } from './outage-suite.ts'

outageSuite(
  'PostgreSQL behind PgBouncer goes away and comes back',
  'pgbouncer',
  (await postgresSkipReason()) ?? pgbouncerSkipReason(),
)
