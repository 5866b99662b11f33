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

-- name: bench_live_heads
-- Heads still to run (ready, held or backing off) in the sessions of the JSON array `:ids`.
select count(*) as n from a2_cursors
 where session_id in (select value from json_each(:ids))
   and head is not null and failed_at is null;

-- name: bench_cursors_done
-- Event cursors of `:consumer` in these sessions that completed their event, and how many
-- of those by their first attempt.
select count(*) as done, coalesce(sum(completed_attempt = 1), 0) as first
  from a2_cursors
 where session_id in (select value from json_each(:ids)) and consumer = :consumer
   and head is null and failed_at is null and completed_idx = position;

-- name: bench_lane_events_done
select count(*) as done, coalesce(sum(completed_attempt = 1), 0) as first
  from a2_lane_events
 where session_id in (select value from json_each(:ids)) and consumer = :consumer
   and done = 1;

-- name: bench_events_in
select count(*) as n from a2_events
 where session_id in (select value from json_each(:ids));
