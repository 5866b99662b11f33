-- The consumer registry: consumers declared, removed and listed; consumers paused and resumed.
-- Conventions: README.md beside this file.

-- name: register_consumers
-- `restarts`: whether each registration starts its backfill over (rules.backfill_restarts,
-- judged by the caller against the stored specs): its progress starts now, empty. A spec
-- without backfill drops any progress; one registered again unchanged keeps it.
insert into {schema}.a2_consumers as r (name, lane, types, backfill, registered_at, updated_at,
                                        backfill_started_at)
select k.name, k.lane,
       case when k.types_json is null then null
            else array(select pg_catalog.json_array_elements_text(k.types_json::json)) end,
       k.backfill, n.now, n.now, case when k.restart then n.now end
  from rows from (pg_catalog.unnest(%(names)s::text[]),
                  pg_catalog.unnest(%(lanes)s::text[]),
                  pg_catalog.unnest(%(types)s::text[]),
                  pg_catalog.unnest(%(backfills)s::boolean[]),
                  pg_catalog.unnest(%(restarts)s::boolean[]))
       as k (name, lane, types_json, backfill, restart)
 cross join (select coalesce(%(now)s::timestamptz, pg_catalog.statement_timestamp()) as now) n
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
where (r.lane, r.types, r.backfill)
      is distinct from (excluded.lane, excluded.types, excluded.backfill)
   or excluded.backfill_started_at is not null;

-- name: backfill_state
-- A log consumer's spec and backfill progress, when it is registered with a backfill.
select name, lane, types, backfill, backfill_started_at, backfill_after, backfill_sessions,
       backfill_done_at
  from {schema}.a2_consumers
 where name = %(name)s and backfill_started_at is not null;

-- name: record_backfill
-- A backfill batch, recorded only over the progress its caller read (`seen_*`): a caller
-- that lost the race records nothing (its wakes changed nothing either). Returns the
-- progress as it is then.
with moved as (
  update {schema}.a2_consumers
     set backfill_after = %(after)s,
         backfill_sessions = backfill_sessions + %(sessions)s::bigint,
         backfill_done_at = case when %(done)s::boolean
                                 then coalesce(%(now)s::timestamptz,
                                               pg_catalog.statement_timestamp()) end
   where name = %(name)s and backfill_started_at = %(seen_started_at)s::timestamptz
     and backfill_after is not distinct from %(seen_after)s::text
     and backfill_done_at is null
  returning name, lane, types, backfill, backfill_started_at, backfill_after,
            backfill_sessions, backfill_done_at
)
select * from moved
union all
select name, lane, types, backfill, backfill_started_at, backfill_after, backfill_sessions,
       backfill_done_at
  from {schema}.a2_consumers
 where name = %(name)s and backfill_started_at is not null
   and not exists (select from moved);

-- name: unregister_consumers
delete from {schema}.a2_consumers where name = any(%(names)s::text[]);

-- name: registered_consumers
select name, lane, types, backfill from {schema}.a2_consumers order by name collate "C";

-- name: pause_consumers
-- A consumer paused already keeps the time it was first paused.
insert into {schema}.a2_consumer_pauses (consumer, paused_at)
select k.name, coalesce(%(now)s::timestamptz, pg_catalog.statement_timestamp())
  from pg_catalog.unnest(%(names)s::text[]) as k (name)
on conflict (consumer) do nothing;

-- name: resume_consumers
-- Ends the pauses and notifies, once each, the sessions where a consumer resumed here has
-- a head claimable now (only the oldest ready heads, up to the limit, are looked at: a
-- wakeups poll finds the rest); returns the sessions notified. The ready heads are a range scan of
-- a2_cursors_ready, filtered by consumer.
with resumed as (
  delete from {schema}.a2_consumer_pauses p
   where p.consumer = any(%(names)s::text[])
  returning p.consumer
), ready as (
  select distinct r.session_id
    from (select c.session_id
            from {schema}.a2_cursors c
           where c.ready_at <= coalesce(%(now)s::timestamptz, pg_catalog.statement_timestamp())
             and c.consumer = any(array(select consumer from resumed))
           order by c.ready_at
           limit %(limit)s::bigint) r
)
select s.session_id,
       pg_catalog.pg_notify(%(channel)s,
                 pg_catalog.json_build_object('session_id', s.session_id, 'head', s.head)::text)
  from {schema}.a2_sessions s
  join ready r on r.session_id = s.session_id;

-- name: resume_consumers@citus
-- As resume_consumers, the payloads coming back (`notify_payloads`, see
-- notify_ready@citus).
with resumed as (
  delete from {schema}.a2_consumer_pauses p
   where p.consumer = any(%(names)s::text[])
  returning p.consumer
), ready as (
  select distinct r.session_id
    from (select c.session_id
            from {schema}.a2_cursors c
           where c.ready_at <= coalesce(%(now)s::timestamptz, pg_catalog.statement_timestamp())
             and c.consumer = any(array(select consumer from resumed))
           order by c.ready_at
           limit %(limit)s::bigint) r
)
select s.session_id,
       array[pg_catalog.json_build_object('session_id', s.session_id, 'head', s.head)::text]
         as notify_payloads
  from {schema}.a2_sessions s
  join ready r on r.session_id = s.session_id;
