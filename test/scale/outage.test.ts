// Issue 3: the database becomes unreachable and comes back, straight to PostgreSQL
// (outage-suite.ts).
import { postgresSkipReason } from '../helpers/postgres.ts'
import { outageSuite } from './outage-suite.ts'

outageSuite('the database goes away and comes back', 'direct', await postgresSkipReason())
