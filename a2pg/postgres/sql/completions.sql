-- Completions and failures: lane records finished, cursors advanced past their heads
-- (queued with an append, or the fenced fast path), failures, dead letters and their
-- redrive. Conventions: README.md beside this file.

-- fragment: next_head
-- The column `next_head`: what cursor `c` (of session row `s`) takes when it moves past
-- its head. An event cursor goes idle, a lane takes its next unfinished queued event, a
-- log cursor its next event of its types.
case c.kind
  when 'event' then null::bigint
  when 'lane' then
    (select pg_catalog.min(l.idx)
       from {schema}.a2_lane_events l
      where l.session_id = c.session_id and l.consumer = c.consumer
        and l.lane = c.lane and not l.done
        and l.idx > greatest(c.head, s.clear_index))
  else
    (select pg_catalog.min(e.idx)
       from {schema}.a2_events e
      where e.session_id = c.session_id and e.idx > c.head
        and e.event_type <> 'a2.cleared'
        and (c.types is null or e.event_type = any(c.types)))
end as next_head

-- fragment: lane_due
-- The column `lane_due`: when next_head is a lane's queued event, the time a delayed
-- target (Target.not_before) holds it until (null: none; a past one holds nothing). One
-- more primary-key probe, for lane cursors only.
case when c.kind = 'lane' then
  (select l.not_before
     from {schema}.a2_lane_events l
    where l.session_id = c.session_id and l.consumer = c.consumer
      and l.lane = c.lane and not l.done
      and l.idx > greatest(c.head, s.clear_index)
    order by l.idx
    limit 1)
end as lane_due

-- fragment: no_attempts
-- The last assignments of an update that gives a cursor a new head (or none): no
-- attempts, claim or failures carry over to it. The including statement sets
-- `claim_expires_at` itself: null, or the new head's due time (lane_due).
attempt_count = 0, first_claimed_at = null, last_claimed_at = null, last_ready_at = null,
claim_holder = null, failure_count = 0,
last_failed_at = null, last_failed_attempt = null, last_error = null,
failed_at = null

-- name: finish_lane_events
update {schema}.a2_lane_events l
   set done = true,
       completed_attempt = k.attempt,
       returned_event_ids = case
         when k.returned is null then null
         else array(select pg_catalog.json_array_elements_text(k.returned::json)) end
  from rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                  pg_catalog.unnest(%(consumers)s::text[]),
                  pg_catalog.unnest(%(lanes)s::text[]),
                  pg_catalog.unnest(%(idxs)s::bigint[]),
                  pg_catalog.unnest(%(attempts)s::int[]),
                  pg_catalog.unnest(%(returned)s::text[]))
       as k (session_id, consumer, lane, idx, attempt, returned)
 where l.session_id = k.session_id and l.consumer = k.consumer and l.lane = k.lane
   and l.idx = k.idx;

-- name: advance_cursors
-- Moves each cursor past its finished head (fenced on that head) to its next_head.
-- `record` keeps the completion on event and log cursors for retries.
with k as (
  select *
    from rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                    pg_catalog.unnest(%(consumers)s::text[]),
                    pg_catalog.unnest(%(keys)s::text[]),
                    pg_catalog.unnest(%(heads)s::bigint[]),
                    pg_catalog.unnest(%(record)s::boolean[]),
                    pg_catalog.unnest(%(attempts)s::int[]),
                    pg_catalog.unnest(%(returned)s::text[]))
         as u (session_id, consumer, cursor_key, head, record, attempt, returned)
), moved as (
  select c.session_id, c.consumer, c.cursor_key, k.record, k.attempt, k.returned,
         c.head as idx, c.lane, c.claim_holder, c.last_ready_at, c.last_claimed_at,
         -- include: next_head
         ,
         -- include: lane_due
    from k
    join {schema}.a2_cursors c
      on c.session_id = k.session_id and c.consumer = k.consumer
     and c.cursor_key = k.cursor_key and c.head = k.head
    join {schema}.a2_sessions s on s.session_id = c.session_id
), ended as (
  -- The completions among the moves (a skip has no attempt), for the attempt history.
  select m.session_id, m.consumer, m.cursor_key, m.idx, m.attempt, m.lane,
         m.claim_holder as holder, m.last_ready_at as ready_at, m.last_claimed_at as started_at,
         %(now)s::timestamptz as ended_at, 'completed' as outcome, null::text as error
    from moved m
   where m.attempt is not null
), recorded as (
  -- include: record_attempts
)
update {schema}.a2_cursors c
   set position = c.head,
       head = m.next_head,
       ready_at = case when m.next_head is null then null
                       else greatest(%(now)s::timestamptz, m.lane_due) end,
       claim_expires_at = case when m.lane_due > %(now)s::timestamptz then m.lane_due end,
       completed_idx = case when m.record then c.head else c.completed_idx end,
       completed_attempt = case when m.record then m.attempt else c.completed_attempt end,
       returned_event_ids = case
         when not m.record then c.returned_event_ids
         when m.returned is null then null
         else array(select pg_catalog.json_array_elements_text(m.returned::json)) end,
       -- include: no_attempts
  from moved m
 where c.session_id = m.session_id and c.consumer = m.consumer
   and c.cursor_key = m.cursor_key;

-- fragment: session_of_k
-- The session of row `k` of a statement's arrays. On Citus the statement runs for one
-- session (Statements.by_session) and names it itself: Citus plans a statement on the
-- session's shard only when each table is filtered by the session as a constant.
k.session_id

-- fragment: session_of_k@citus
%(session_id)s::text

-- fragment: session_of_c
-- The session of cursor row `c` (see session_of_k).
c.session_id

-- fragment: session_of_c@citus
%(session_id)s::text

-- fragment: session_of_m
-- The session of row `m` (see session_of_k).
m.session_id

-- fragment: session_of_m@citus
%(session_id)s::text

-- name: complete_fenced
-- (On Citus it runs once per session, Statements.by_session: the fence counts the
-- statement's own completions, and session_of_* name the one session.)
-- The fast path of complete_attempts: completions returning no events, each fenced on
-- its exact attempt (re-checked on the row as locked). If any misses its fence the
-- statement fails with the marker below and the transaction rolls back; the caller then
-- judges the batch one by one.
with t as materialized (
  -- The time, read once (Citus refuses a function's call inside CASE or COALESCE).
  select coalesce(%(now)s::timestamptz, pg_catalog.now()) as now
), k as (
  select *
    from rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                    pg_catalog.unnest(%(consumers)s::text[]),
                    pg_catalog.unnest(%(keys)s::text[]),
                    pg_catalog.unnest(%(heads)s::bigint[]),
                    pg_catalog.unnest(%(attempts)s::int[]))
         as u (session_id, consumer, cursor_key, head, attempt)
), moved as (
  select c.session_id, c.consumer, c.cursor_key, c.kind, c.lane, c.head, k.attempt,
         c.claim_holder, c.last_ready_at, c.last_claimed_at,
         -- include: next_head
         ,
         -- include: lane_due
    from k
    join {schema}.a2_cursors c
      on c.consumer = k.consumer
     and c.session_id =
         -- include: session_of_k
     and c.cursor_key = k.cursor_key and c.head = k.head
    join {schema}.a2_sessions s
      on s.session_id =
         -- include: session_of_c
   where c.attempt_count = k.attempt and c.claim_holder is not null
     and c.failed_at is null and c.head > s.clear_index
), advanced as (
  update {schema}.a2_cursors c
     set position = c.head,
         head = m.next_head,
         ready_at = case when m.next_head is null then null
                         else greatest(t.now, m.lane_due) end,
         claim_expires_at = case when m.lane_due > t.now then m.lane_due end,
         completed_idx = case when m.kind = 'lane' then c.completed_idx else c.head end,
         completed_attempt = case when m.kind = 'lane' then c.completed_attempt
                                  else m.attempt end,
         returned_event_ids = case when m.kind = 'lane' then c.returned_event_ids
                                   else array[]::text[] end,
         -- include: no_attempts
    from moved m cross join t
   where c.consumer = m.consumer
     and c.session_id =
         -- include: session_of_m
     and c.cursor_key = m.cursor_key and c.head = m.head
     and c.attempt_count = m.attempt and c.claim_holder is not null and c.failed_at is null
  returning c.session_id, c.consumer, c.cursor_key
), ended as (
  select m.session_id, m.consumer, m.cursor_key, m.head as idx, m.attempt, m.lane,
         m.claim_holder as holder, m.last_ready_at as ready_at, m.last_claimed_at as started_at,
         t.now as ended_at, 'completed' as outcome, null::text as error
    from t cross join moved m
    join advanced a
      on a.session_id = m.session_id and a.consumer = m.consumer
     and a.cursor_key = m.cursor_key
), recorded as (
  -- include: record_attempts
), lanes as (
  update {schema}.a2_lane_events l
     set done = true, completed_attempt = m.attempt, returned_event_ids = array[]::text[]
    from moved m
   where m.kind = 'lane' and l.consumer = m.consumer
     and l.session_id =
         -- include: session_of_m
     and l.lane = m.lane and l.idx = m.head
  returning 1
)
select (case when pg_catalog.count(*) = pg_catalog.cardinality(%(session_ids)s::text[])
             then null
             else 'a2pg: a completion missed its fence' end)::int as missed
  from advanced;

-- name: fail_head
-- Records the failure on the head and in the attempt history (its holder and claim time
-- as they were: `o`, the row before the update).
with failed as (
  update {schema}.a2_cursors c
     set failure_count = %(failure_count)s::int,
         last_error = %(error)s,
         last_failed_at = %(now)s::timestamptz,
         last_failed_attempt = %(attempt)s::int,
         failed_at = case when %(dead)s::boolean then %(now)s::timestamptz end,
         claim_holder = null,
         claim_expires_at = %(retry_at)s::timestamptz,
         ready_at = case when %(dead)s::boolean then null
                         else coalesce(%(retry_at)s::timestamptz, %(now)s::timestamptz) end
    from {schema}.a2_cursors o
   where c.session_id = %(session_id)s and c.consumer = %(consumer)s
     and c.cursor_key = %(cursor_key)s and c.head = %(idx)s::bigint
     and c.attempt_count = %(attempt)s::int
     and o.session_id = c.session_id and o.consumer = c.consumer
     and o.cursor_key = c.cursor_key
  returning c.session_id, c.consumer, c.cursor_key, c.head, c.lane, o.claim_holder,
            o.last_ready_at, o.last_claimed_at
), ended as (
  select f.session_id, f.consumer, f.cursor_key, f.head as idx, %(attempt)s::int as attempt,
         f.lane, f.claim_holder as holder, f.last_ready_at as ready_at,
         f.last_claimed_at as started_at,
         %(now)s::timestamptz as ended_at,
         case when %(dead)s::boolean then 'dead_lettered' else 'failed' end as outcome,
         %(error)s::text as error
    from failed f
), recorded as (
  -- include: record_attempts
)
select pg_catalog.count(*) as failed from failed;

-- name: dead_letters
select c.*, s.clear_index,
       -- include: head_event_columns
  from {schema}.a2_cursors c
  join {schema}.a2_sessions s on s.session_id = c.session_id
  join {schema}.a2_events e on e.session_id = c.session_id and e.idx = c.head
 where c.session_id = %(session_id)s
   and c.failed_at is not null
   and c.head > s.clear_index
 order by c.head, c.consumer collate "C", coalesce(c.lane, '') collate "C";

-- name: dead_head
-- redrive naming no lane: the consumer's dead head at idx that dead_letters lists first
-- (an event cursor's key '#<idx>' sorts before any lane's 'L<lane>').
select c.*
  from {schema}.a2_cursors c
 where c.session_id = %(session_id)s and c.consumer = %(consumer)s
   and c.head = %(idx)s::bigint and c.failed_at is not null
 order by c.cursor_key collate "C"
 limit 1
   for update;

-- name: dead_head_of_cursor
-- redrive naming a lane (or None, the event cursor): that one cursor's head, if dead at idx.
select c.*
  from {schema}.a2_cursors c
 where c.session_id = %(session_id)s and c.consumer = %(consumer)s
   and c.cursor_key = %(cursor_key)s
   and c.head = %(idx)s::bigint and c.failed_at is not null
   for update;

-- name: retry_head
update {schema}.a2_cursors c
   set failed_at = null, failure_count = 0, ready_at = %(now)s::timestamptz
 where c.session_id = %(session_id)s and c.consumer = %(consumer)s
   and c.cursor_key = %(cursor_key)s and c.head = %(idx)s::bigint;

-- name: live_head
-- cancel_head naming no lane: the consumer's live head at idx (not dead-lettered, above
-- the clear index) that claims order first (an event cursor's key '#<idx>' sorts before
-- any lane's 'L<lane>').
select c.*
  from {schema}.a2_cursors c
  join {schema}.a2_sessions s on s.session_id = c.session_id
 where c.session_id = %(session_id)s and c.consumer = %(consumer)s
   and c.head = %(idx)s::bigint and c.failed_at is null and c.head > s.clear_index
 order by c.cursor_key collate "C"
 limit 1
   for update of c;

-- name: live_head_of_cursor
-- cancel_head naming a lane (or None, the event cursor): that one cursor's head, if live
-- at idx.
select c.*
  from {schema}.a2_cursors c
  join {schema}.a2_sessions s on s.session_id = c.session_id
 where c.session_id = %(session_id)s and c.consumer = %(consumer)s
   and c.cursor_key = %(cursor_key)s
   and c.head = %(idx)s::bigint and c.failed_at is null and c.head > s.clear_index
   for update of c;

-- name: cancel_dead_letter
-- cancel_head's dead_letter: the head is dead from now, its claim (if any) gone, so the
-- attempt still running is superseded; no failure is counted.
update {schema}.a2_cursors c
   set failed_at = %(now)s::timestamptz, last_error = %(error)s,
       claim_holder = null, claim_expires_at = null, ready_at = null
 where c.session_id = %(session_id)s and c.consumer = %(consumer)s
   and c.cursor_key = %(cursor_key)s and c.head = %(idx)s::bigint;

-- name: hold_cursor_until
-- After cancel_head skipped a head under a live lease: the cursor's next head (if any)
-- is held back until that lease would have lapsed, as a delay holds it.
update {schema}.a2_cursors c
   set ready_at = greatest(c.ready_at, %(until)s::timestamptz),
       claim_expires_at = greatest(coalesce(c.claim_expires_at, %(until)s::timestamptz),
                                   %(until)s::timestamptz)
 where c.session_id = %(session_id)s and c.consumer = %(consumer)s
   and c.cursor_key = %(cursor_key)s and c.head is not null
   and c.failed_at is null and c.claim_holder is null;
