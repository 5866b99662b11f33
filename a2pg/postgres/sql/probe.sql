-- What the demo and bench poll while workers run (a2pg/postgres/probe.py): counts read
-- straight from the tables, and the workers connected. Conventions: README.md beside
-- this file.

-- name: probe_counts
-- `events`: the sum of session heads (one small row per session, where counting the
-- events table would scan it); `live`: heads still to run (held, backing off or ready);
-- `dead`: dead-lettered heads.
select
    (select coalesce(sum(head), 0) from a2_sessions) as events,
    (select count(*) from a2_cursors where head is not null and failed_at is null) as live,
    (select count(*) from a2_cursors where head is not null and failed_at is not null) as dead;

-- name: probe_connected
select count(distinct application_name) from pg_stat_activity
where application_name like %(prefix)s;
