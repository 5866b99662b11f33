-- Runs once, as the superuser, when the postgres service first initializes its volume
-- (the image runs /docker-entrypoint-initdb.d/*.sql in the database POSTGRES_DB).
--
--   a2pg_owner   runs `a2pg migrate`: owns schema a2 and every table the migration makes
--   a2pg_worker  the runtime role of workers and inspection commands: no CREATE anywhere,
--                only what `a2pg grants a2pg_worker --apply` grants it after each migration
--
-- Change both passwords here and in compose.yml before using this beyond a laptop.
create role a2pg_owner login password 'a2pg-owner';
create role a2pg_worker login password 'a2pg-worker';

create schema a2 authorization a2pg_owner;
grant usage on schema a2 to a2pg_worker;

-- Nobody else may create anything: not in schema public, not new schemas, no temp tables.
revoke all on schema public from public;
do $$
begin
    execute pg_catalog.format(
        'revoke create, temporary on database %I from public', pg_catalog.current_database());
    execute pg_catalog.format(
        'grant create on database %I to a2pg_owner', pg_catalog.current_database());
end
$$;
