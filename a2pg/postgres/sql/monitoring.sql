-- Monitoring: each consumer's work across sessions, the dead letters of every session,
-- and what a dead-lettered lane or log head holds back. Every statement reads indexes
-- that hold only the few rows it wants, never all of a2_cursors (finished cursors are
-- most of it) nor a2_events: heads still to run are the rows of a2_cursors_ready (see
-- ready_at in README.md), dead letters those of a2_cursors_dead.
-- Conventions: README.md beside this file.

-- fragment: blocked_behind
-- What cursor `c` holds back when its head is dead-lettered (0 otherwise, and for event
-- cursors): a lane's queued events after its head, a log cursor's later events of its
-- types (the clear marker never among them). Primary-key range scans of one session.
case when c.failed_at is null or c.kind = 'event' then 0
     when c.kind = 'lane' then
       (select pg_catalog.count(*) from {schema}.a2_lane_events l
         where l.session_id = c.session_id and l.consumer = c.consumer and l.lane = c.lane
           and l.idx > c.head and not l.done)
     else
       (select pg_catalog.count(*) from {schema}.a2_events e
         where e.session_id = c.session_id and e.idx > c.head
           and e.event_type <> 'a2.cleared'
           and (c.types is null or e.event_type = any(c.types)))
end

-- name: consumer_stats
-- Per consumer holding heads, registered, paused or named by a live worker's heartbeat,
-- by name (zeros where it has nothing). `live` walks a2_cursors_ready (no session lookup:
-- a head at or below its clear index has no ready_at); a live head not ready and without
-- a holder backs off after a failure, else waits for its target's not_before
-- (`scheduled`). `dead` and `blocked` walk a2_cursors_dead and drop the dead heads a
-- clear left for reclaim. `served` counts the workers not stale (WorkerInfo.stale: not
-- seen for three intervals) naming each consumer; a2_workers, a2_consumers and
-- a2_consumer_pauses hold a row per worker or consumer, never per session.
with t as (
  select coalesce(%(now)s::timestamptz, pg_catalog.statement_timestamp()) as now
), live as (
  select c.consumer,
         pg_catalog.count(*) filter (where c.ready_at <= t.now) as ready,
         pg_catalog.count(*) filter (where c.ready_at > t.now and c.claim_holder is not null)
           as claimed,
         pg_catalog.count(*) filter (where c.ready_at > t.now and c.claim_holder is null
                                       and c.failure_count > 0) as backing_off,
         pg_catalog.count(*) filter (where c.ready_at > t.now and c.claim_holder is null
                                       and c.failure_count = 0) as scheduled,
         pg_catalog.min(c.ready_at) filter (where c.ready_at <= t.now) as oldest_ready
    from {schema}.a2_cursors c cross join t
   where c.ready_at is not null
   group by c.consumer
), dead as (
  select c.consumer, pg_catalog.count(*) as dead_letters
    from {schema}.a2_cursors c
    join {schema}.a2_sessions s on s.session_id = c.session_id
   where c.failed_at is not null and c.head > s.clear_index
   group by c.consumer
), blocked as (
  -- Apart from `dead`, so the planner costs the counts behind dead heads by the lane and
  -- log cursors among them only (an estimate too high would have the page JIT-compiled).
  select c.consumer, pg_catalog.count(*) as blocked_lanes,
         pg_catalog.sum(
           -- include: blocked_behind
         ) as blocked,
         pg_catalog.min(c.failed_at) as oldest_blocked
    from {schema}.a2_cursors c
    join {schema}.a2_sessions s on s.session_id = c.session_id
   where c.failed_at is not null and c.kind <> 'event' and c.head > s.clear_index
   group by c.consumer
), served as (
  select u.consumer, pg_catalog.count(distinct w.holder) as served_by
    from {schema}.a2_workers w
   cross join t
   cross join lateral pg_catalog.unnest(w.consumers) as u(consumer)
   where greatest(extract(epoch from t.now - w.last_seen)::float8, 0)
         <= 3 * w.interval_seconds
   group by u.consumer
), named as (
  select consumer from live
  union
  select consumer from dead
  union
  select name from {schema}.a2_consumers
  union
  select consumer from {schema}.a2_consumer_pauses
  union
  select consumer from served
)
select n.consumer,
       coalesce(l.ready, 0) as ready,
       coalesce(l.claimed, 0) as claimed,
       coalesce(l.backing_off, 0) as backing_off,
       coalesce(l.scheduled, 0) as scheduled,
       coalesce(d.dead_letters, 0) as dead_letters,
       coalesce(b.blocked_lanes, 0) as blocked_lanes,
       coalesce(b.blocked, 0)::bigint as blocked,
       extract(epoch from t.now - l.oldest_ready)::float8 as oldest_ready_age,
       extract(epoch from t.now - b.oldest_blocked)::float8 as oldest_blocked_age,
       coalesce(v.served_by, 0) as served_by,
       r.name is not null as registered,
       p.consumer is not null as paused,
       r.backfill_started_at, r.backfill_after, r.backfill_sessions, r.backfill_done_at
  from named n
 cross join t
  left join live l on l.consumer = n.consumer
  left join dead d on d.consumer = n.consumer
  left join blocked b on b.consumer = n.consumer
  left join served v on v.consumer = n.consumer
  left join {schema}.a2_consumers r on r.name = n.consumer
  left join {schema}.a2_consumer_pauses p on p.consumer = n.consumer
 order by n.consumer collate "C";

-- name: find_dead_letters
-- One page of every session's dead letters, in a2_cursors_dead's order from the key
-- after `after_*` ('', '', '', 0 for the first page: no session id is empty), filtered.
-- The error filter folds ASCII letters only (lower under collate "C"), as
-- contract.rules.error_matches does.
select c.*,
       -- include: head_event_columns
  from (select c.*, (select s.clear_index from {schema}.a2_sessions s
                      where s.session_id = c.session_id) as clear_index
          from {schema}.a2_cursors c
         where c.failed_at is not null) c
  join {schema}.a2_events e on e.session_id = c.session_id and e.idx = c.head
 where c.head > c.clear_index
   and (c.session_id collate "C", c.consumer collate "C", coalesce(c.lane, '') collate "C",
        c.head)
       > (%(after_session)s::text, %(after_consumer)s::text, %(after_lane)s::text,
          %(after_index)s::bigint)
   and (%(consumer)s::text is null or c.consumer = %(consumer)s::text)
   and (%(prefix)s::text is null or pg_catalog.starts_with(c.session_id, %(prefix)s::text))
   and (%(error)s::text is null
        or pg_catalog.strpos(pg_catalog.lower(c.last_error collate "C"),
                             pg_catalog.lower(%(error)s::text collate "C")) > 0)
 order by c.session_id collate "C", c.consumer collate "C", coalesce(c.lane, '') collate "C",
          c.head
 limit %(limit)s::bigint;

-- fragment: find_heads_times
-- find_heads: the ready_at range of the page's state and start (ready up to now, the
-- others after it; from the page key's time on), for `c`.
c.ready_at >= coalesce(%(after_ready)s::timestamptz, '-infinity'::timestamptz)
and c.ready_at > case when %(state)s::text = 'ready' then '-infinity'::timestamptz
                      else coalesce(%(now)s::timestamptz, pg_catalog.statement_timestamp()) end
and c.ready_at <= case when %(state)s::text = 'ready'
                       then coalesce(%(now)s::timestamptz, pg_catalog.statement_timestamp())
                       else 'infinity'::timestamptz end

-- name: find_heads
-- One page of every session's live heads in one state (memory.monitoring.work_state, as
-- consumer_stats counts them), in claim_any's order from the key after `after_*` (a null
-- time for the first page), filtered as find_dead_letters is (and by the head event's
-- type). That order is a2_cursors_ready's (ready_at), then the key's rest, which no index
-- holds. So `times` walks the index one ready_at after another (each a min(): one probe
-- of its first entry past the last, which the planner always reads off the index), and
-- `page` takes each time's heads (an index equality; an append's heads share their
-- time) in key order, filtered, until it has `limit`: the recursion is pulled only as far
-- as the limit needs. No plan can read every head of the state and sort them (the trap
-- of one `order by ... limit`: a bitmap scan and a sort when the filters look
-- selective). No session is looked up for the walk (a head at or below its clear index
-- has no ready_at); the page's clear indexes are read after the limit, one per head.
with recursive times as (
  select (select pg_catalog.min(c.ready_at) from {schema}.a2_cursors c
           where
                 -- include: find_heads_times
         ) as at
  union all
  select (select pg_catalog.min(c.ready_at) from {schema}.a2_cursors c
           where c.ready_at > t.at
             and
                 -- include: find_heads_times
         )
    from times t
   where t.at is not null
), page as (
  select h.*
    from times t
   cross join lateral (
     select c.*,
            -- include: head_event_columns
       from {schema}.a2_cursors c
       join {schema}.a2_events e on e.session_id = c.session_id and e.idx = c.head
      where c.ready_at = t.at
        and (c.ready_at, c.session_id collate "C", c.head, c.consumer collate "C",
             coalesce(c.lane, '') collate "C")
            > (coalesce(%(after_ready)s::timestamptz, '-infinity'::timestamptz),
               %(after_session)s::text, %(after_index)s::bigint,
               %(after_consumer)s::text, %(after_lane)s::text)
        and case %(state)s::text
              when 'held' then c.claim_holder is not null
              when 'backing_off' then c.claim_holder is null and c.failure_count > 0
              when 'scheduled' then c.claim_holder is null and c.failure_count = 0
              else true
            end
        and (%(consumer)s::text is null or c.consumer = %(consumer)s::text)
        and (%(event_type)s::text is null or e.event_type = %(event_type)s::text)
        and (%(prefix)s::text is null
             or pg_catalog.starts_with(c.session_id, %(prefix)s::text))
        and (%(error)s::text is null
             or pg_catalog.strpos(pg_catalog.lower(c.last_error collate "C"),
                                  pg_catalog.lower(%(error)s::text collate "C")) > 0)
      order by c.session_id collate "C", c.head, c.consumer collate "C",
               coalesce(c.lane, '') collate "C"
   ) h
   where t.at is not null
   limit %(limit)s::bigint
)
select p.*,
       (select s.clear_index from {schema}.a2_sessions s
         where s.session_id = p.session_id) as clear_index
  from page p
 order by p.ready_at, p.session_id collate "C", p.head, p.consumer collate "C",
          coalesce(p.lane, '') collate "C";

-- name: find_heads@citus
-- As find_heads, in a shape Citus runs on every shard at once: each shard's first page
-- (its heads joined to their events and sessions, which are co-located), merged and cut
-- to the page on the coordinator. No walk of the index: Citus runs a recursive CTE only
-- within one session.
select c.*,
       -- include: head_event_columns
       , s.clear_index
  from {schema}.a2_cursors c
  join {schema}.a2_events e on e.session_id = c.session_id and e.idx = c.head
  join {schema}.a2_sessions s on s.session_id = c.session_id
 where c.ready_at is not null
   and (c.ready_at, c.session_id collate "C", c.head, c.consumer collate "C",
        coalesce(c.lane, '') collate "C")
       > (coalesce(%(after_ready)s::timestamptz, '-infinity'::timestamptz),
          %(after_session)s::text, %(after_index)s::bigint,
          %(after_consumer)s::text, %(after_lane)s::text)
   and
       -- include: find_heads_times
   and case %(state)s::text
         when 'held' then c.claim_holder is not null
         when 'backing_off' then c.claim_holder is null and c.failure_count > 0
         when 'scheduled' then c.claim_holder is null and c.failure_count = 0
         else true
       end
   and (%(consumer)s::text is null or c.consumer = %(consumer)s::text)
   and (%(event_type)s::text is null or e.event_type = %(event_type)s::text)
   and (%(prefix)s::text is null or pg_catalog.starts_with(c.session_id, %(prefix)s::text))
   and (%(error)s::text is null
        or pg_catalog.strpos(pg_catalog.lower(c.last_error collate "C"),
                             pg_catalog.lower(%(error)s::text collate "C")) > 0)
 order by c.ready_at, c.session_id collate "C", c.head, c.consumer collate "C",
          coalesce(c.lane, '') collate "C"
 limit %(limit)s::bigint;
