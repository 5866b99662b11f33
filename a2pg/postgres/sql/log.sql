-- The event log: session rows, the writes of an append (events, event and lane
-- cursors, log cursors woken), reads of events and cursors, listings, and the
-- notification a committed write sends. Conventions: README.md beside this file.

-- fragment: event_columns
-- The columns of events `e` that codec.event reads.
e.session_id, e.idx, e.event_id, e.event_type, e.payload, e.created_at,
e.cause_consumer, e.cause_lane, e.cause_index, e.cause_attempt, e.trace_parent

-- name: ensure_session
insert into {schema}.a2_sessions (session_id, created_at)
values (%(session_id)s, coalesce(%(now)s::timestamptz, pg_catalog.clock_timestamp()))
on conflict (session_id) do nothing;

-- name: lock_sessions
select session_id, head, clear_index
  from {schema}.a2_sessions
 where session_id = any(%(session_ids)s::text[])
 order by session_id
   for update;

-- name: server_now
select pg_catalog.clock_timestamp() as now;

-- name: session_heads
select session_id, head
  from {schema}.a2_sessions
 where session_id = any(%(session_ids)s::text[]);

-- name: set_session_heads
update {schema}.a2_sessions s
   set head = k.head
  from rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                  pg_catalog.unnest(%(heads)s::bigint[])) as k (session_id, head)
 where s.session_id = k.session_id;

-- name: read_events
-- `visible`: never below the clear marker (reads, and a stream's first look); a running
-- stream reads on from where it is, so a clear never makes it skip an index.
select
       -- include: event_columns
  from {schema}.a2_events e
 where e.session_id = %(session_id)s
   and (not %(visible)s::boolean
        or e.idx >= coalesce(
             (select s.clear_index from {schema}.a2_sessions s
               where s.session_id = %(session_id)s), 0))
   and e.idx > %(after)s::bigint
   and e.idx <= %(through)s::bigint
   and (%(types)s::text[] is null or e.event_type = any(%(types)s::text[]))
 order by e.idx
 limit %(limit)s::bigint;

-- name: select_events_by_ids
-- The event that owns each id (at most one: retired ones gave theirs up, see
-- free_stale_ids), one probe each of the unique index of owned ids.
select
       -- include: event_columns
  from {schema}.a2_events e
  join rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                  pg_catalog.unnest(%(event_ids)s::text[])) as k (session_id, event_id)
    on e.session_id = k.session_id and e.event_id = k.event_id and not e.id_retired;

-- name: select_cursors
select c.*
  from {schema}.a2_cursors c
  join rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                  pg_catalog.unnest(%(consumers)s::text[]),
                  pg_catalog.unnest(%(keys)s::text[]))
       as k (session_id, consumer, cursor_key)
    on c.consumer = k.consumer
   and c.session_id =
       -- include: session_of_k
   and c.cursor_key = k.cursor_key
   for update of c;

-- name: select_lane_events
select l.session_id, l.consumer, l.lane, l.idx, l.done, l.completed_attempt,
       l.returned_event_ids
  from {schema}.a2_lane_events l
  join rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                  pg_catalog.unnest(%(consumers)s::text[]),
                  pg_catalog.unnest(%(lanes)s::text[]),
                  pg_catalog.unnest(%(idxs)s::bigint[]))
       as k (session_id, consumer, lane, idx)
    on l.session_id = k.session_id and l.consumer = k.consumer and l.lane = k.lane
   and l.idx = k.idx;

-- name: list_cursors
select c.*
  from {schema}.a2_cursors c
  left join {schema}.a2_sessions s on s.session_id = c.session_id
 where c.session_id = %(session_id)s
   and (c.kind = 'log'
        or c.head > coalesce(s.clear_index, 0)
        or (c.kind = 'lane' and c.head is null and c.position > coalesce(s.clear_index, 0)))
 order by c.consumer collate "C", c.lane is null, c.lane collate "C", c.head;

-- name: has_pending
select exists (
  select 1
    from {schema}.a2_cursors c
   where c.session_id = %(session_id)s
     and c.head > coalesce(
           (select s.clear_index from {schema}.a2_sessions s
             where s.session_id = %(session_id)s), 0)
     and c.failed_at is null
     and (%(names)s::text[] is null or c.consumer = any(%(names)s::text[]))
) as has_pending;

-- name: sessions_page
-- `after` is '' for the first page (no session id is empty): one range scan of
-- a2_sessions_listing per page, whatever plan the statement gets. Per session of the
-- page: its heads (a2_cursors_heads) counted above the clear index, and its newest event
-- by primary key; then what the page's dead lanes and logs hold back (a2_cursors_dead,
-- probed per session: its key is collate "C"). The heads are selected by
-- `head is not null` alone, whose selectivity the planner knows (few), and the dead
-- lanes apart from them: else it guesses many rows per session and costs a large page
-- high enough to JIT-compile it, which takes longer than the page itself.
with page as (
  select session_id, head, clear_index
    from {schema}.a2_sessions
   where session_id collate "C" > %(after)s::text
   order by session_id collate "C"
   limit %(limit)s::bigint
), blocked as (
  select c.session_id,
         pg_catalog.sum(
           -- include: blocked_behind
         ) as blocked
    from page p
    join {schema}.a2_cursors c on c.session_id collate "C" = p.session_id
   where c.failed_at is not null and c.kind <> 'event' and c.head > p.clear_index
   group by c.session_id
)
select s.session_id, s.head, s.clear_index, w.pending, w.dead_letters,
       coalesce(b.blocked, 0)::bigint as blocked,
       (select e.created_at from {schema}.a2_events e
         where e.session_id = s.session_id and e.idx = s.head) as last_event_at
  from page s
 cross join lateral (
    select pg_catalog.count(*) filter (where c.head > s.clear_index and c.failed_at is null)
             as pending,
           pg_catalog.count(*) filter (where c.head > s.clear_index
                                         and c.failed_at is not null) as dead_letters
      from {schema}.a2_cursors c
     where c.session_id = s.session_id and c.head is not null
  ) w
  left join blocked b on b.session_id = s.session_id
 order by s.session_id collate "C";

-- name: sessions_page@citus
-- As sessions_page, in the shapes Citus plans: the page (one ordered range scan per
-- shard, merged), then each table joined to it on session_id alone (the page is sent to
-- the shards), no lateral join.
with page as materialized (
  select session_id, head, clear_index
    from {schema}.a2_sessions
   where session_id collate "C" > %(after)s::text
   order by session_id collate "C"
   limit %(limit)s::bigint
), heads as (
  select c.session_id,
         pg_catalog.count(*) filter (where c.head > p.clear_index and c.failed_at is null)
           as pending,
         pg_catalog.count(*) filter (where c.head > p.clear_index and c.failed_at is not null)
           as dead_letters,
         pg_catalog.sum(
           -- include: blocked_behind
         ) filter (where c.failed_at is not null and c.kind <> 'event'
                     and c.head > p.clear_index) as blocked
    from page p
    join {schema}.a2_cursors c on c.session_id = p.session_id
   where c.head is not null
   group by c.session_id
), newest as (
  select e.session_id, e.created_at
    from page p
    join {schema}.a2_events e on e.session_id = p.session_id and e.idx = p.head
)
select s.session_id, s.head, s.clear_index, coalesce(w.pending, 0)::bigint as pending,
       coalesce(w.dead_letters, 0)::bigint as dead_letters,
       coalesce(w.blocked, 0)::bigint as blocked, n.created_at as last_event_at
  from page s
  left join heads w on w.session_id = s.session_id
  left join newest n on n.session_id = s.session_id
 order by s.session_id collate "C";

-- name: free_stale_ids
-- Events below a clear marker do not own their ids any more: those the new events
-- reuse are retired, leaving the unique index of owned ids, and stay until reclaim
-- (streams behind the clear still read them). Only sessions that were cleared are asked.
update {schema}.a2_events e
   set id_retired = true
  from rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                  pg_catalog.unnest(%(event_ids)s::text[])) as k (session_id, event_id)
 where e.session_id = k.session_id and e.event_id = k.event_id and not e.id_retired
   and e.idx < (select s.clear_index from {schema}.a2_sessions s
                 where s.session_id = e.session_id);

-- name: insert_events
-- `trace_parents` may be shorter than the other arrays (empty when no event of the
-- transaction has a trace context): rows from pads it with nulls.
insert into {schema}.a2_events (session_id, idx, event_id, event_type, payload, created_at,
                       cause_consumer, cause_lane, cause_index, cause_attempt, trace_parent)
select k.session_id, k.idx, k.event_id, k.event_type, k.payload::json, %(now)s::timestamptz,
       k.cause_consumer, k.cause_lane, k.cause_index, k.cause_attempt, k.trace_parent
  from rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                  pg_catalog.unnest(%(idxs)s::bigint[]),
                  pg_catalog.unnest(%(event_ids)s::text[]),
                  pg_catalog.unnest(%(types)s::text[]),
                  pg_catalog.unnest(%(payloads)s::text[]),
                  pg_catalog.unnest(%(cause_consumers)s::text[]),
                  pg_catalog.unnest(%(cause_lanes)s::text[]),
                  pg_catalog.unnest(%(cause_indexes)s::bigint[]),
                  pg_catalog.unnest(%(cause_attempts)s::int[]),
                  pg_catalog.unnest(%(trace_parents)s::text[]))
       as k (session_id, idx, event_id, event_type, payload, cause_consumer, cause_lane,
             cause_index, cause_attempt, trace_parent);

-- name: insert_event_cursors
-- `dues`: each delayed target's due time (rules.due_at; null: claimable now). A delayed
-- head is held back as a backoff is, by claim_expires_at with no holder.
insert into {schema}.a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head,
                                 ready_at, claim_expires_at)
select k.session_id, k.consumer, k.cursor_key, 'event', null, k.idx - 1, k.idx,
       coalesce(k.due, %(now)s::timestamptz), k.due
  from rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                  pg_catalog.unnest(%(consumers)s::text[]),
                  pg_catalog.unnest(%(keys)s::text[]),
                  pg_catalog.unnest(%(idxs)s::bigint[]),
                  pg_catalog.unnest(%(dues)s::timestamptz[]))
       as k (session_id, consumer, cursor_key, idx, due);

-- name: insert_lane_events
-- `dues`: as insert_event_cursors'; the lane's head is held until then once it reaches
-- the event (lane_due, completions.sql).
insert into {schema}.a2_lane_events (session_id, consumer, lane, idx, not_before)
select k.session_id, k.consumer, k.lane, k.idx, k.due
  from rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                  pg_catalog.unnest(%(consumers)s::text[]),
                  pg_catalog.unnest(%(lanes)s::text[]),
                  pg_catalog.unnest(%(idxs)s::bigint[]),
                  pg_catalog.unnest(%(dues)s::timestamptz[]))
       as k (session_id, consumer, lane, idx, due)
on conflict do nothing;

-- name: queue_lane_heads
-- An idle lane cursor (or one left below the clear marker) takes the lane's first new
-- event; a busy one keeps its head and reaches the new events when it advances.
insert into {schema}.a2_cursors as c (session_id, consumer, cursor_key, kind, lane, position, head,
                             ready_at, claim_expires_at)
select k.session_id, k.consumer, k.cursor_key, 'lane', k.lane, s.clear_index, k.idx,
       coalesce(k.due, %(now)s::timestamptz), k.due
  from rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                  pg_catalog.unnest(%(consumers)s::text[]),
                  pg_catalog.unnest(%(keys)s::text[]),
                  pg_catalog.unnest(%(lanes)s::text[]),
                  pg_catalog.unnest(%(idxs)s::bigint[]),
                  pg_catalog.unnest(%(dues)s::timestamptz[]))
       as k (session_id, consumer, cursor_key, lane, idx, due)
  join {schema}.a2_sessions s on s.session_id = k.session_id
on conflict (session_id, consumer, cursor_key) do update set
  head = excluded.head,
  position = greatest(c.position, excluded.position),
  ready_at = excluded.ready_at,
  claim_expires_at = excluded.claim_expires_at,
  -- include: no_attempts
where c.head is null or c.head <= excluded.position;

-- name: queue_lane_heads@citus
-- As queue_lane_heads, for one session (`session_id`, Statements.by_session), in the shape
-- Citus runs on the session's shard: every table filtered by the session itself, the
-- write in a CTE (an INSERT ... SELECT that reads a distributed table is not planned).
with s as (
  select clear_index from {schema}.a2_sessions where session_id = %(session_id)s
), queued as (
  insert into {schema}.a2_cursors as c (session_id, consumer, cursor_key, kind, lane, position,
                                        head, ready_at, claim_expires_at)
  select %(session_id)s::text, k.consumer, k.cursor_key, 'lane', k.lane, s.clear_index, k.idx,
         coalesce(k.due, %(now)s::timestamptz), k.due
    from rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                    pg_catalog.unnest(%(consumers)s::text[]),
                    pg_catalog.unnest(%(keys)s::text[]),
                    pg_catalog.unnest(%(lanes)s::text[]),
                    pg_catalog.unnest(%(idxs)s::bigint[]),
                    pg_catalog.unnest(%(dues)s::timestamptz[]))
         as k (session_id, consumer, cursor_key, lane, idx, due)
   cross join s
  on conflict (session_id, consumer, cursor_key) do update set
    head = excluded.head,
    position = greatest(c.position, excluded.position),
    ready_at = excluded.ready_at,
    claim_expires_at = excluded.claim_expires_at,
    -- include: no_attempts
  where c.head is null or c.head <= excluded.position
  returning 1
)
select pg_catalog.count(*) from queued;

-- name: refresh_log_types
-- Records each declared log consumer's types on its cursor (the seeds' refreshLogTypes).
update {schema}.a2_cursors c
   set types = k.types
  from (select u.session_id, u.consumer, u.cursor_key,
               case when u.types_json is null then null
                    else array(select pg_catalog.json_array_elements_text(u.types_json::json)) end
               as types
          from rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                          pg_catalog.unnest(%(consumers)s::text[]),
                          pg_catalog.unnest(%(keys)s::text[]),
                          pg_catalog.unnest(%(types)s::text[]))
               as u (session_id, consumer, cursor_key, types_json)) k
 where c.session_id = k.session_id and c.consumer = k.consumer
   and c.cursor_key = k.cursor_key and c.kind = 'log'
   and c.types is distinct from k.types;

-- name: wake_log_cursors
-- A missing log cursor opens at `position` and takes its first event after it; an
-- existing one records its types and, when idle, takes its next event of them.
with k as (
  select u.session_id, u.consumer, u.cursor_key, u.lane, u.position,
         case when u.types_json is null then null
              else array(select pg_catalog.json_array_elements_text(u.types_json::json)) end as types
    from rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                    pg_catalog.unnest(%(consumers)s::text[]),
                    pg_catalog.unnest(%(keys)s::text[]),
                    pg_catalog.unnest(%(lanes)s::text[]),
                    pg_catalog.unnest(%(types)s::text[]),
                    pg_catalog.unnest(%(positions)s::bigint[]))
         as u (session_id, consumer, cursor_key, lane, types_json, position)
), woken as (
  select k.*, (select pg_catalog.min(e.idx)
                 from {schema}.a2_events e
                where e.session_id = k.session_id
                  and e.idx > coalesce(cur.position, k.position)
                  and e.event_type <> 'a2.cleared'
                  and (k.types is null or e.event_type = any(k.types))) as next_head
    from k
    left join {schema}.a2_cursors cur
      on cur.session_id = k.session_id and cur.consumer = k.consumer
     and cur.cursor_key = k.cursor_key
)
insert into {schema}.a2_cursors as c (session_id, consumer, cursor_key, kind, lane, position, head,
                             types, ready_at)
select w.session_id, w.consumer, w.cursor_key, 'log', w.lane, w.position, w.next_head,
       w.types, case when w.next_head is null then null else %(now)s::timestamptz end
  from woken w
on conflict (session_id, consumer, cursor_key) do update set
  types = excluded.types,
  head = coalesce(c.head, excluded.head),
  ready_at = case when c.head is null then excluded.ready_at else c.ready_at end
where c.kind = 'log';

-- name: wake_log_cursors@citus
-- As wake_log_cursors, for one session (`session_id`, Statements.by_session), in the shape
-- Citus runs on the session's shard (see queue_lane_heads@citus).
with k as (
  select u.session_id, u.consumer, u.cursor_key, u.lane, u.position,
         case when u.types_json is null then null
              else array(select pg_catalog.json_array_elements_text(u.types_json::json)) end as types
    from rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                    pg_catalog.unnest(%(consumers)s::text[]),
                    pg_catalog.unnest(%(keys)s::text[]),
                    pg_catalog.unnest(%(lanes)s::text[]),
                    pg_catalog.unnest(%(types)s::text[]),
                    pg_catalog.unnest(%(positions)s::bigint[]))
         as u (session_id, consumer, cursor_key, lane, types_json, position)
), woken as (
  select k.*, (select pg_catalog.min(e.idx)
                 from {schema}.a2_events e
                where e.session_id = %(session_id)s
                  and e.idx > coalesce(cur.position, k.position)
                  and e.event_type <> 'a2.cleared'
                  and (k.types is null or e.event_type = any(k.types))) as next_head
    from k
    left join {schema}.a2_cursors cur
      on cur.session_id = %(session_id)s and cur.consumer = k.consumer
     and cur.cursor_key = k.cursor_key
), woke as (
  insert into {schema}.a2_cursors as c (session_id, consumer, cursor_key, kind, lane, position, head,
                               types, ready_at)
  select %(session_id)s::text, w.consumer, w.cursor_key, 'log', w.lane, w.position, w.next_head,
         w.types, case when w.next_head is null then null else %(now)s::timestamptz end
    from woken w
  on conflict (session_id, consumer, cursor_key) do update set
    types = excluded.types,
    head = coalesce(c.head, excluded.head),
    ready_at = case when c.head is null then excluded.ready_at else c.ready_at end
  where c.kind = 'log'
  returning 1
)
select pg_catalog.count(*) from woke;

-- name: notify_ready
-- At most one notification per session per transaction, only where this transaction
-- made a head claimable (its ready_at is this transaction's time); returns the sessions
-- notified.
select s.session_id,
       pg_catalog.pg_notify(%(channel)s,
                 pg_catalog.json_build_object('session_id', s.session_id, 'head', s.head)::text)
  from {schema}.a2_sessions s
 where s.session_id = any(%(session_ids)s::text[])
   and exists (select 1 from {schema}.a2_cursors c
                where c.ready_at = coalesce(%(now)s::timestamptz, pg_catalog.now())
                  and c.session_id = s.session_id);

-- name: notify_ready@citus
-- Citus runs a statement on one session's shard where the shard is, pg_notify included
-- (listeners of the coordinator would not hear it, and a transaction that Citus commits
-- in two phases fails at its COMMIT): the payloads come back, and the store sends them
-- from the coordinator once the transaction committed (notify_sessions).
with t as (
  select %(now)s::timestamptz as given, pg_catalog.now() as server
)
select s.session_id,
       array[pg_catalog.json_build_object('session_id', s.session_id, 'head', s.head)::text]
         as notify_payloads
  from {schema}.a2_sessions s cross join t
 where s.session_id = any(%(session_ids)s::text[])
   and exists (select 1 from {schema}.a2_cursors c
                where c.ready_at = coalesce(t.given, t.server)
                  and c.session_id = s.session_id);

-- name: session_shard
-- On Citus, the shard of `a2_sessions` that holds (or will hold) a session's row, from
-- Citus's metadata on the coordinator: the store runs that session's writes on the node
-- of its shard group (Database.session_group).
select pg_catalog.get_shard_id_for_distribution_column(%(sessions)s::text::regclass,
                                                       %(session_id)s::text) as shard;

-- name: notify_sessions
-- On Citus, the notifications a statement's `notify_payloads` hold, sent from the
-- coordinator (this statement reads no table: Citus runs it where it is sent), each
-- naming the shard of its session's row (`shard`, from Citus's metadata on the
-- coordinator): a listener claiming shard group by shard group starts at that one.
select pg_catalog.pg_notify(
         %(channel)s,
         (p::jsonb || pg_catalog.jsonb_build_object(
            'shard', pg_catalog.get_shard_id_for_distribution_column(
                       %(sessions)s::text::regclass, p::json ->> 'session_id')))::text)
  from pg_catalog.unnest(%(payloads)s::text[]) as p;

-- fragment: append_events_written
-- An append in one autocommit statement (log.append_fresh; the other shapes take
-- log.append's transaction), one statement per shape of batch so that each runs only
-- the parts it needs: append_events (event targets or none), append_lanes (lane
-- targets too), append_wakes (log consumers to wake), append_fresh (both). The upsert
-- creates, locks and moves the session row first (every other part reads its row), the
-- clock is read under that lock, then the events, their event and lane cursors and the
-- log wakes are written, NOTIFY is sent when any head became claimable, and
-- has_pending is answered from what the statement wrote and what it saw. The
-- statement's snapshot is taken before the session lock, so the log wakes (which read
-- earlier events) are only right if the snapshot holds every event below this batch:
-- if another append committed meanwhile (`stale`), the statement fails with the marker
-- in append_answer and the caller takes the transaction instead, as it does when a
-- supplied id is taken (a unique violation) or the session was cleared and ids are
-- supplied (their old events must give them up first: free_stale_ids). No row comes
-- back when `origin` is at or below the clear index (nothing is written).
--
-- The CTEs `s` (the session row, created or locked, its head moved), `t` (its old
-- head `base`, clear index `ci` and the time read under the lock), `k` (the events),
-- `inserted` (each with the batch's one `trace_parent`, null when there is none), `g`
-- (the targets) and `event_cursors`.
s as (
  insert into {schema}.a2_sessions as s (session_id, head, created_at)
  values (%(session_id)s, %(n)s, coalesce(%(now)s::timestamptz, pg_catalog.clock_timestamp()))
  on conflict (session_id) do update set head = s.head + excluded.head
   where %(origin)s::bigint is null or s.clear_index < %(origin)s::bigint
  returning s.session_id as sid, s.head - %(n)s as base, s.clear_index as ci
), t as materialized (
  select s.*, coalesce(%(now)s::timestamptz, pg_catalog.clock_timestamp()) as now,
         %(names)s::text[] as names
    from s
), k as (
  select *
    from rows from (pg_catalog.json_to_recordset(%(events)s::json) as (i text, t text, p json))
         with ordinality as u (id, type, payload, n)
), inserted as (
  insert into {schema}.a2_events (session_id, idx, event_id, event_type, payload, created_at,
                                  trace_parent)
  select %(session_id)s::text, t.base + k.n, k.id, k.type, coalesce(k.payload, 'null'::json), t.now,
         %(trace_parent)s::text
    from t, k
), g as (
  select * from pg_catalog.json_to_recordset(%(targets)s::json) as u (n bigint, c text, l text)
), event_cursors as (
  insert into {schema}.a2_cursors (session_id, consumer, cursor_key, kind, position, head,
                                   ready_at)
  select %(session_id)s::text, g.c, %(event_key)s || t.base + g.n, 'event', t.base + g.n - 1, t.base + g.n,
         t.now
    from t, g
   where g.l is null
  returning consumer

-- fragment: append_lanes_written
-- The CTEs `lane_events` and `lane_heads` (after append_events_written).
lane_events as (
  insert into {schema}.a2_lane_events (session_id, consumer, lane, idx)
  select %(session_id)s::text, g.c, g.l, t.base + g.n from t, g where g.l is not null
), lane_heads as (
  -- An idle lane cursor (or one left below the clear marker) takes the lane's first new
  -- event; a busy one keeps its head and reaches the new events when it advances.
  insert into {schema}.a2_cursors as c (session_id, consumer, cursor_key, kind, lane,
                                        position, head, ready_at)
  select %(session_id)s::text, g.c, %(lane_key)s || g.l, 'lane', g.l, t.ci, t.base + pg_catalog.min(g.n),
         t.now
    from t, g
   where g.l is not null
   group by t.base, t.ci, t.now, g.c, g.l
  on conflict (session_id, consumer, cursor_key) do update set
    head = excluded.head,
    position = greatest(c.position, excluded.position),
    ready_at = excluded.ready_at,
    claim_expires_at = null,
    -- include: no_attempts
  where c.head is null or c.head <= excluded.position
  returning consumer

-- fragment: append_wakes_written
-- The CTEs `w` (the log consumers to wake), `current`, `o`, `woken` and `log_heads`
-- (after append_events_written).
w as (
  select u.c, u.k, u.l, u.b,
         case when u.y is not null then array(select pg_catalog.json_array_elements_text(u.y))
         end as types
    from pg_catalog.json_to_recordset(%(wakes)s::json) as u (c text, k text, l text, y json,
                                                            b boolean)
), current as (
  -- The log cursors woken, as they are now (locked: one changed since the snapshot is
  -- read as committed); only a transaction holding the session row creates one.
  select x.*
    from t cross join w
   cross join lateral (
     select c.consumer, c.cursor_key, c.kind, c.position, c.head
       from {schema}.a2_cursors c
      where c.session_id = %(session_id)s::text and c.consumer = w.c and c.cursor_key = w.k
      limit 1
        for update of c) x
), o as (
  select w.*, x.head,
         coalesce(x.position, case when w.b then t.ci else t.base end) as position
    from t cross join w
    left join current x on x.consumer = w.c and x.cursor_key = w.k
), woken as (
  -- A missing log cursor opens at `position`, an idle one is at it: each takes its first
  -- event after it of its types, among the events before this batch (the snapshot holds
  -- them all, see `stale`) and this batch's own; a busy one keeps its head.
  select o.*, coalesce(o.head, least(
           (select pg_catalog.min(e.idx)
              from {schema}.a2_events e
             where e.session_id = %(session_id)s::text and e.idx > o.position
               and e.event_type <> 'a2.cleared'
               and (o.types is null or e.event_type = any(o.types))),
           (select t.base + pg_catalog.min(k.n)
              from k
             where t.base + k.n > o.position
               and (o.types is null or k.type = any(o.types))))) as next
    from t, o
), log_heads as (
  insert into {schema}.a2_cursors as c (session_id, consumer, cursor_key, kind, lane,
                                        position, head, types, ready_at)
  select %(session_id)s::text, w.c, w.k, 'log', w.l, w.position, w.next, w.types,
         case when w.next is not null then t.now end
    from t, woken w
  on conflict (session_id, consumer, cursor_key) do update set
    types = excluded.types,
    head = coalesce(c.head, excluded.head),
    ready_at = case when c.head is null then excluded.ready_at else c.ready_at end
  where c.kind = 'log'
  returning c.consumer, c.head > c.position and c.failed_at is null as pending, c.ready_at

-- fragment: append_stale
-- The CTE `stale`: whether an append committed between this statement's snapshot and
-- its session lock (the snapshot's last event is not the head it locked), or a log
-- consumer woken has a targeted lane cursor on its lane (the transaction refuses that).
stale as (
  select t.base <> coalesce((select pg_catalog.max(e.idx) from {schema}.a2_events e
                              where e.session_id = %(session_id)s::text), 0)
         or exists (select from current x where x.kind <> 'log') as stale
    from t
)

-- fragment: append_answer
-- NOTIFY when a head became claimable (`fresh`: the heads written, each `ready` or
-- not), then the statement's one row: the batch's base index, the clear index, the
-- time, whether it notified, has_pending, and the marker when it must decline.
-- include: append_notified
select t.base, t.ci, t.now, (select pg_catalog.count(*) from notified) as notified,
       -- include: append_notify_payloads
       exists (select from {schema}.a2_cursors c
                where c.session_id = %(session_id)s::text and c.head > t.ci and c.failed_at is null
                  and (t.names is null or c.consumer = any(t.names)))
       or exists (select from fresh f where t.names is null or f.consumer = any(t.names))
       as has_pending,
       (case when t.ci > 0 and %(supplied)s or (select stale from stale)
             then 'a2pg: an append must take the transaction' end)::int as retry
  from t

-- fragment: append_notified
notified as (
  select pg_catalog.pg_notify(%(channel)s, pg_catalog.json_build_object(
           'session_id', %(session_id)s::text, 'head', t.base + %(n)s)::text)
    from t
   where exists (select from fresh where ready)
)

-- fragment: append_notified@citus
-- On Citus the payload comes back (`notify_payloads`, see notify_ready@citus).
notified as (
  select pg_catalog.json_build_object(
           'session_id', %(session_id)s::text, 'head', t.base + %(n)s)::text as payload
    from t
   where exists (select from fresh where ready)
)

-- fragment: append_notify_payloads
-- (nothing on plain PostgreSQL: the statement notified)

-- fragment: append_notify_payloads@citus
array(select payload from notified) as notify_payloads,

-- name: append_events
with
-- include: append_events_written
), fresh as (
  select consumer, true as ready from event_cursors
), stale as (
  select false as stale
),
-- include: append_answer
;

-- name: append_lanes
with
-- include: append_events_written
),
-- include: append_lanes_written
), fresh as (
  select consumer, true as ready from event_cursors
  union all select consumer, true from lane_heads
), stale as (
  select false as stale
),
-- include: append_answer
;

-- name: append_wakes
with
-- include: append_events_written
),
-- include: append_wakes_written
), fresh as (
  select consumer, true as ready from event_cursors
  union all select x.consumer, x.ready_at = t.now from t, log_heads x where x.pending
),
-- include: append_stale
,
-- include: append_answer
;

-- name: append_fresh
with
-- include: append_events_written
),
-- include: append_lanes_written
),
-- include: append_wakes_written
), fresh as (
  select consumer, true as ready from event_cursors
  union all select consumer, true from lane_heads
  union all select x.consumer, x.ready_at = t.now from t, log_heads x where x.pending
),
-- include: append_stale
,
-- include: append_answer
;
