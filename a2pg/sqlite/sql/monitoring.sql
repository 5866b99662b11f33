-- Monitoring: each consumer's work across sessions, the dead letters of every session,
-- what a dead-lettered lane or log head holds back, and worker heartbeats. Heads still
-- to run are the rows of a2_cursors_ready, dead letters those of a2_cursors_dead: no
-- statement reads all of a2_cursors (finished cursors are most of it) nor a2_events.
-- Conventions: README.md beside this file.

-- fragment: blocked_behind
-- What cursor `c` holds back when its head is dead-lettered (0 otherwise, and for event
-- cursors): a lane's queued events after its head, a log cursor's later events of its
-- types (the clear marker never among them). Primary-key ranges of one session.
case when c.failed_at is null or c.kind = 'event' then 0
     when c.kind = 'lane' then
       (select count(*) from a2_lane_events l
         where l.session_id = c.session_id and l.consumer = c.consumer and l.lane = c.lane
           and l.idx > c.head and l.done = 0)
     else
       (select count(*) from a2_events e
         where e.session_id = c.session_id and e.idx > c.head
           and e.event_type <> 'a2.cleared'
           and (c.types is null or e.event_type in (select value from json_each(c.types))))
end

-- name: consumer_stats
-- Per consumer holding heads, registered, paused or named by a live worker's heartbeat,
-- by name (zeros where it has nothing). A live head is ready from its ready_at on, else
-- leased while a holder is set, else backing off after a failure, else held back by its
-- target's not_before (`scheduled`; rules.head_state). `live` walks a2_cursors_ready (a
-- head at or below its clear index has no ready_at); `dead` walks a2_cursors_dead
-- (named: the planner would take a2_cursors_heads, every head) and drops the dead heads a
-- clear left for reclaim. `served` counts the workers not stale (WorkerInfo.stale: seen
-- more than three intervals ago, in seconds as Python divides) naming each consumer;
-- a2_workers, a2_consumers and a2_consumer_pauses hold a row per worker or consumer.
with live as (
  select c.consumer,
         sum(c.ready_at <= :now) as ready,
         sum(c.ready_at > :now and c.claim_holder is not null) as claimed,
         sum(c.ready_at > :now and c.claim_holder is null and c.failure_count > 0)
           as backing_off,
         sum(c.ready_at > :now and c.claim_holder is null and c.failure_count = 0)
           as scheduled,
         min(case when c.ready_at <= :now then c.ready_at end) as oldest_ready
    from a2_cursors c
   where c.ready_at is not null
   group by c.consumer
), dead as (
  select c.consumer, count(*) as dead_letters,
         sum(c.kind <> 'event') as blocked_lanes,
         sum(
           -- include: blocked_behind
         ) as blocked,
         min(case when c.kind <> 'event' then c.failed_at end) as oldest_blocked
    from a2_cursors c indexed by a2_cursors_dead
    left join a2_clears k on k.session_id = c.session_id
   where c.failed_at is not null and c.head > coalesce(k.clear_index, 0)
   group by c.consumer
), served as (
  select u.value as consumer, count(distinct w.holder) as served_by
    from a2_workers w, json_each(w.consumers) u
   where max(0, (:now - w.last_seen) / 1000000.0) <= 3 * w.interval_seconds
   group by u.value
), named as (
  select consumer from live
  union
  select consumer from dead
  union
  select name from a2_consumers
  union
  select consumer from a2_consumer_pauses
  union
  select consumer from served
)
select n.consumer,
       coalesce(l.ready, 0) as ready,
       coalesce(l.claimed, 0) as claimed,
       coalesce(l.backing_off, 0) as backing_off,
       coalesce(l.scheduled, 0) as scheduled,
       coalesce(d.dead_letters, 0) as dead_letters,
       coalesce(d.blocked_lanes, 0) as blocked_lanes,
       coalesce(d.blocked, 0) as blocked,
       l.oldest_ready,
       d.oldest_blocked,
       coalesce(v.served_by, 0) as served_by,
       r.name is not null as registered,
       p.consumer is not null as paused,
       r.backfill_started_at, r.backfill_after, r.backfill_sessions, r.backfill_done_at
  from named n
  left join live l on l.consumer = n.consumer
  left join dead d on d.consumer = n.consumer
  left join served v on v.consumer = n.consumer
  left join a2_consumers r on r.name = n.consumer
  left join a2_consumer_pauses p on p.consumer = n.consumer
 order by n.consumer;

-- name: find_dead_letters
-- One page of every session's dead letters, in a2_cursors_dead's order from the key after
-- `after_*` ('', '', '', 0 for the first page: no session id is empty), filtered. SQLite's
-- lower() folds ASCII letters only, as contract.rules.error_matches does.
select
       -- include: head_columns
  from a2_cursors c
  join a2_events e on e.session_id = c.session_id and e.idx = c.head
  left join a2_clears k on k.session_id = c.session_id
 where c.failed_at is not null
   and (c.session_id, c.consumer, coalesce(c.lane, ''), c.head)
       > (:after_session, :after_consumer, :after_lane, :after_index)
   and c.head > coalesce(k.clear_index, 0)
   and (:consumer is null or c.consumer = :consumer)
   and (:prefix is null or substr(c.session_id, 1, length(:prefix)) = :prefix)
   and (:error is null or instr(lower(c.last_error), lower(:error)) > 0)
 order by c.session_id, c.consumer, coalesce(c.lane, ''), c.head
 limit :limit;

-- name: find_heads
-- One page of every session's live heads in one state (memory.monitoring.work_state, as
-- consumer_stats counts them), in a2_cursors_ready's order (claim_any's) from the key after
-- `after_*`, filtered as find_dead_letters is (and by the head event's type). The state is
-- a range of ready_at (`start` through `high`: up to now for ready heads, after it for the
-- others, from the page key's time on) and a test of holder and failures; the range walks
-- the index from the page's start, and the scan stops at the limit (no sort).
select
       -- include: head_columns
  from a2_cursors c
  join a2_events e on e.session_id = c.session_id and e.idx = c.head
  left join a2_clears k on k.session_id = c.session_id
 where c.ready_at is not null
   and c.ready_at between :start and :high
   and (c.ready_at, c.session_id, c.head, c.consumer, coalesce(c.lane, ''))
       > (:after_ready, :after_session, :after_index, :after_consumer, :after_lane)
   and c.head > coalesce(k.clear_index, 0)
   and case :state
         when 'held' then c.claim_holder is not null
         when 'backing_off' then c.claim_holder is null and c.failure_count > 0
         when 'scheduled' then c.claim_holder is null and c.failure_count = 0
         else 1
       end
   and (:consumer is null or c.consumer = :consumer)
   and (:event_type is null or e.event_type = :event_type)
   and (:prefix is null or substr(c.session_id, 1, length(:prefix)) = :prefix)
   and (:error is null or instr(lower(c.last_error), lower(:error)) > 0)
 order by c.ready_at, c.session_id, c.head, c.consumer, coalesce(c.lane, '')
 limit :limit;

-- name: heartbeat
-- Inserts or replaces the holder's row; started_at stays while the beats come from the
-- same host and pid (a holder name reused by a new process starts again).
insert into a2_workers as w (holder, host, pid, consumers, concurrency, started_at,
                             last_seen, in_flight, version, interval_seconds, completed,
                             failed)
values (:holder, :host, :pid, :consumers, :concurrency, :now, :now, :in_flight, :version,
        :interval, :completed, :failed)
on conflict (holder) do update set
  host = excluded.host,
  pid = excluded.pid,
  consumers = excluded.consumers,
  concurrency = excluded.concurrency,
  started_at = case when w.host = excluded.host and w.pid = excluded.pid then w.started_at
                    else excluded.started_at end,
  last_seen = excluded.last_seen,
  in_flight = excluded.in_flight,
  version = excluded.version,
  interval_seconds = excluded.interval_seconds,
  completed = excluded.completed,
  failed = excluded.failed;

-- name: forget_worker
delete from a2_workers where holder = :holder;

-- name: list_workers
select w.* from a2_workers w order by w.holder;
