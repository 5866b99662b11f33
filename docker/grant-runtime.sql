-- The runtime role's grants, run by the owner (a2pg_owner) after every `a2pg migrate`, so
-- a table a new a2pg version adds is granted too. Idempotent. Exactly what
-- docs/operating/schemas-roles.md says a runtime role needs: USAGE on the schema; SELECT,
-- INSERT, UPDATE, DELETE on the a2_ tables; only SELECT on a2_meta; nothing on the version
-- table.
grant usage on schema a2 to a2pg_worker;
grant select, insert, update, delete on all tables in schema a2 to a2pg_worker;
revoke insert, update, delete on a2.a2_meta from a2pg_worker;
revoke all on a2.a2_alembic_version from a2pg_worker;
