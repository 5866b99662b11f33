-- What the demo and bench poll while workers run (a2pg/sqlite/probe.py): counts read
-- straight from the tables. Conventions: README.md beside this file.

-- name: probe_counts
-- `events`: events ever appended (the sum of session heads); `live`: heads still to run
-- (held, backing off or ready); `dead`: dead-lettered heads.
select
    (select coalesce(sum(h.head), 0)
       from (select max(idx) as head from a2_events group by session_id) h) as events,
    (select count(*) from a2_cursors
      where head is not null and failed_at is null and ready_at is not null) as live,
    (select count(*) from a2_cursors
      where head is not null and failed_at is not null) as dead;
