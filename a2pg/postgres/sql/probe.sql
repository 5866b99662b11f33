-- What the demo and bench poll while workers run (a2pg/postgres/probe.py): counts read
-- straight from the tables, and the workers connected. Conventions: README.md beside
-- this file.

-- name: probe_counts
-- `events`: the sum of session heads (one small row per session, where counting the
-- events table would scan it); `live`: heads still to run (held, backing off or ready);
-- `dead`: dead-lettered heads.
select
    (select coalesce(pg_catalog.sum(head), 0) from {schema}.a2_sessions) as events,
    (select pg_catalog.count(*) from {schema}.a2_cursors
      where head is not null and failed_at is null) as live,
    (select pg_catalog.count(*) from {schema}.a2_cursors
      where head is not null and failed_at is not null) as dead;

-- name: probe_connected
-- The clients connected under these names (behind a pooler: the names its server
-- connections last served).
select distinct application_name from pg_catalog.pg_stat_activity
 where application_name like %(prefix)s;
