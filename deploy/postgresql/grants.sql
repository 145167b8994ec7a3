-- The service's runtime role on PostgreSQL, with the least it needs (D27; docs/operations.md,
-- Migrations). Run it as the role that owns the tables, the one `petstore migrate` runs as, once
-- the first `petstore migrate` has made them, and again after an upgrade whose CHANGELOG says so:
--
--   psql "$OWNER_DATABASE_URL" -v ON_ERROR_STOP=1 -v runtime=petstore -f deploy/postgresql/grants.sql
--
-- `runtime` names the role in the instances' DATABASE_URL. Each table's privileges are taken
-- back before they are given, so running it again changes nothing, and it narrows a role that
-- was granted more before (the earlier docs gave writes on every table).

-- Serving and the `keys` commands: pets created, listed and read; a create with an
-- Idempotency-Key writes its record, or takes over an expired one (INSERT … ON CONFLICT DO
-- UPDATE); keys made, looked up and revoked; expired records purged (D14, D3).
REVOKE ALL ON pets, api_keys, idempotency_keys FROM :"runtime";
GRANT SELECT, INSERT, UPDATE, DELETE ON pets, api_keys, idempotency_keys TO :"runtime";

-- A create with an Idempotency-Key draws the pet's id from the identity's sequence before the pet
-- is inserted (D14).
REVOKE ALL ON SEQUENCE pets_id_seq FROM :"runtime";
GRANT USAGE ON SEQUENCE pets_id_seq TO :"runtime";

-- The migration ledger and the record of the environment that made the database: every start
-- reads them, and only the owner writes them. A ledger row the runtime role could add stops
-- every instance at its next start (D27); a record it could change would let the staging
-- commands empty production's database (D29).
REVOKE ALL ON schema_migrations, database_environment FROM :"runtime";
GRANT SELECT ON schema_migrations, database_environment TO :"runtime";
