-- The consumer registry: log consumers declared, removed and listed; consumers paused and
-- resumed.
-- Conventions: README.md beside this file.

-- name: register_consumer
-- `:restart`: whether the registration starts its backfill over (rules.backfill_restarts,
-- judged by the caller against the stored spec): its progress starts now, empty. A spec
-- without backfill drops any progress; one registered again unchanged keeps it.
insert into a2_consumers as r (name, lane, types, backfill, registered_at, updated_at,
                               backfill_started_at)
values (:name, :lane, :types, :backfill, :now, :now, case when :restart then :now end)
on conflict (name) do update
  set lane = excluded.lane, types = excluded.types, backfill = excluded.backfill,
      updated_at = excluded.updated_at,
      backfill_started_at = case when not excluded.backfill then null
                                 else coalesce(excluded.backfill_started_at,
                                               r.backfill_started_at) end,
      backfill_after = case when excluded.backfill and excluded.backfill_started_at is null
                            then r.backfill_after end,
      backfill_sessions = case when excluded.backfill and excluded.backfill_started_at is null
                               then r.backfill_sessions else 0 end,
      backfill_done_at = case when excluded.backfill and excluded.backfill_started_at is null
                              then r.backfill_done_at end
where r.lane is not excluded.lane or r.types is not excluded.types
   or r.backfill is not excluded.backfill or excluded.backfill_started_at is not null;

-- name: backfill_state
-- A log consumer's spec and backfill progress, when it is registered with a backfill.
select name, lane, types, backfill, backfill_started_at, backfill_after, backfill_sessions,
       backfill_done_at
  from a2_consumers
 where name = :name and backfill_started_at is not null;

-- name: record_backfill
-- A backfill batch, recorded only over the progress its caller read (`:seen_*`).
update a2_consumers
   set backfill_after = :after,
       backfill_sessions = backfill_sessions + :sessions,
       backfill_done_at = case when :done then :now end
 where name = :name and backfill_started_at = :seen_started_at
   and backfill_after is :seen_after and backfill_done_at is null;

-- name: unregister_consumer
delete from a2_consumers where name = :name;

-- name: registered_consumers
select name, lane, types, backfill from a2_consumers order by name;

-- name: pause_consumer
-- A consumer paused already keeps the time it was first paused.
insert into a2_consumer_pauses (consumer, paused_at) values (:name, :now)
on conflict (consumer) do nothing;

-- name: resume_consumer
delete from a2_consumer_pauses where consumer = :name;

-- name: resumed_ready_sessions
-- The sessions where one of the consumers `:names` (a JSON array) has a head claimable
-- now, among their oldest `:limit` ready heads: what a resume announces to wakeups.
select distinct r.session_id
  from (select c.session_id
          from a2_cursors c
         where c.ready_at is not null and c.ready_at <= :now
           and c.consumer in (select value from json_each(:names))
         order by c.ready_at
         limit :limit) r
 order by r.session_id;
