-- Every statement of the PostgreSQL store, each under a `-- name:` header.
--
-- Tables are unqualified: the store's connections run with search_path set to its
-- schema. `%(now)s` is the transaction's time: the injected clock's, or the server's
-- `clock_timestamp()` read under the session lock. Statements that run alone take
-- `coalesce(%(now)s, statement_timestamp())` so one code path serves both clocks.
-- Text is ordered `collate "C"` (code points), as Python orders str.
--
-- Lock order: a2_sessions rows (sorted), then a2_cursors rows, then snapshot pins and
-- history. Only claim_any takes cursor rows without the session row, and it never
-- waits (SKIP LOCKED).
--
-- ready_at is when a cursor's head becomes claimable: head set -> now; claimed ->
-- lease end; failed with retry_after -> backoff end; failed without -> now;
-- dead-lettered or idle -> null.


-- name: ensure_session
insert into a2_sessions (session_id, created_at)
values (%(session_id)s, coalesce(%(now)s::timestamptz, clock_timestamp()))
on conflict (session_id) do nothing;

-- name: lock_sessions
select session_id, head, clear_index
  from a2_sessions
 where session_id = any(%(session_ids)s::text[])
 order by session_id
   for update;

-- name: server_now
select clock_timestamp() as now;

-- name: session_row
select session_id, head, clear_index from a2_sessions where session_id = %(session_id)s;


-- Reads -----------------------------------------------------------------------------

-- name: read_events
-- `visible`: never below the clear marker (reads, and a stream's first look); a running
-- stream reads on from where it is, so a clear never makes it skip an index.
select e.session_id, e.idx, e.event_id, e.event_type, e.payload, e.created_at,
       e.cause_consumer, e.cause_lane, e.cause_index, e.cause_attempt
  from a2_events e
 where e.session_id = %(session_id)s
   and (not %(visible)s::boolean
        or e.idx >= coalesce(
             (select s.clear_index from a2_sessions s where s.session_id = %(session_id)s), 0))
   and e.idx > %(after)s::bigint
   and e.idx <= %(through)s::bigint
   and (%(types)s::text[] is null or e.event_type = any(%(types)s::text[]))
 order by e.idx
 limit %(limit)s::bigint;

-- name: select_cursors
select c.*
  from a2_cursors c
  join unnest(%(session_ids)s::text[], %(consumers)s::text[], %(keys)s::text[])
       as k (session_id, consumer, cursor_key)
    on c.session_id = k.session_id and c.consumer = k.consumer
   and c.cursor_key = k.cursor_key
   for update of c;

-- name: select_lane_events
select l.session_id, l.consumer, l.lane, l.idx, l.done, l.completed_attempt,
       l.returned_event_ids
  from a2_lane_events l
  join unnest(%(session_ids)s::text[], %(consumers)s::text[], %(lanes)s::text[],
              %(idxs)s::bigint[]) as k (session_id, consumer, lane, idx)
    on l.session_id = k.session_id and l.consumer = k.consumer and l.lane = k.lane
   and l.idx = k.idx;

-- name: select_events_by_ids
select e.session_id, e.idx, e.event_id, e.event_type, e.payload, e.created_at,
       e.cause_consumer, e.cause_lane, e.cause_index, e.cause_attempt
  from a2_events e
  join unnest(%(session_ids)s::text[], %(event_ids)s::text[]) as k (session_id, event_id)
    on e.session_id = k.session_id and e.event_id = k.event_id;

-- name: select_event_indexes
select e.session_id, e.idx
  from a2_events e
  join unnest(%(session_ids)s::text[], %(idxs)s::bigint[]) as k (session_id, idx)
    on e.session_id = k.session_id and e.idx = k.idx;

-- name: list_cursors
select c.*
  from a2_cursors c
  left join a2_sessions s on s.session_id = c.session_id
 where c.session_id = %(session_id)s
   and (c.kind = 'log'
        or c.head > coalesce(s.clear_index, 0)
        or (c.kind = 'lane' and c.head is null and c.position > coalesce(s.clear_index, 0)))
 order by c.consumer collate "C", c.lane is null, c.lane collate "C", c.head;

-- name: dead_letters
select c.*, s.clear_index,
       e.event_id as e_event_id, e.event_type as e_event_type, e.payload as e_payload,
       e.created_at as e_created_at, e.cause_consumer as e_cause_consumer,
       e.cause_lane as e_cause_lane, e.cause_index as e_cause_index,
       e.cause_attempt as e_cause_attempt
  from a2_cursors c
  join a2_sessions s on s.session_id = c.session_id
  join a2_events e on e.session_id = c.session_id and e.idx = c.head
 where c.session_id = %(session_id)s
   and c.failed_at is not null
   and c.head > s.clear_index
 order by c.head, c.consumer collate "C", coalesce(c.lane, '') collate "C";

-- name: has_pending
select exists (
  select 1
    from a2_cursors c
   where c.session_id = %(session_id)s
     and c.head > coalesce(
           (select s.clear_index from a2_sessions s where s.session_id = %(session_id)s), 0)
     and c.failed_at is null
     and (%(names)s::text[] is null or c.consumer = any(%(names)s::text[]))
) as has_pending;

-- name: sessions_page
-- `after` is '' for the first page (no session id is empty): one range scan of
-- a2_sessions_listing per page, whatever plan the statement gets.
select s.session_id, s.head, s.clear_index,
       count(c.session_id) filter (where c.failed_at is null) as pending,
       count(c.session_id) filter (where c.failed_at is not null) as dead_letters
  from (select session_id, head, clear_index
          from a2_sessions
         where session_id collate "C" > %(after)s::text
         order by session_id collate "C"
         limit %(limit)s::bigint) s
  left join a2_cursors c on c.session_id = s.session_id and c.head > s.clear_index
 group by s.session_id, s.head, s.clear_index
 order by s.session_id collate "C";

-- name: read_state
-- The newest snapshot between the clear index and `through` (capped at the head), then
-- the events after it; the snapshot's state rides on the first row only.
with b as (
  select s.head, s.clear_index,
         least(coalesce(%(through)s::bigint, s.head), s.head) as upto
    from a2_sessions s
   where s.session_id = %(session_id)s
), snap as (
  select x.up_to_index, x.state
    from (select up_to_index, state from a2_snapshots
           where session_id = %(session_id)s and reducer = %(reducer)s
          union all
          select up_to_index, state from a2_snapshot_history
           where session_id = %(session_id)s and reducer = %(reducer)s) x
    cross join b
   where x.up_to_index >= b.clear_index and x.up_to_index <= b.upto
   order by x.up_to_index desc
   limit 1
)
select b.head, b.clear_index, snap.up_to_index as snapshot_index,
       case when row_number() over (order by e.idx) = 1 then snap.state end as state,
       e.session_id, e.idx, e.event_id, e.event_type, e.payload, e.created_at,
       e.cause_consumer, e.cause_lane, e.cause_index, e.cause_attempt
  from b
  left join snap on true
  left join a2_events e
    on e.session_id = %(session_id)s
   and e.idx > greatest(coalesce(snap.up_to_index, 0), b.clear_index - 1)
   and e.idx <= b.upto
 order by e.idx;

-- name: registered_consumers
select name, lane, types, backfill from a2_consumers order by name collate "C";

-- name: ready_sessions
-- The sessions whose oldest heads are claimable now: what a wakeups poll announces.
select distinct r.session_id
  from (select c.session_id
          from a2_cursors c
         where c.ready_at <= coalesce(%(now)s::timestamptz, statement_timestamp())
         order by c.ready_at
         limit %(limit)s::bigint) r;

-- name: session_heads
select session_id, head from a2_sessions where session_id = any(%(session_ids)s::text[]);


-- Writes of appends and completions (queued together, one round trip) -------------------

-- name: free_stale_ids
-- Events below a clear marker do not own their ids any more: those the new events
-- reuse go (only sessions that were cleared are asked).
delete from a2_events e
 using unnest(%(session_ids)s::text[], %(event_ids)s::text[]) as k (session_id, event_id)
 where e.session_id = k.session_id and e.event_id = k.event_id
   and e.idx < (select s.clear_index from a2_sessions s where s.session_id = e.session_id);

-- name: insert_events
insert into a2_events (session_id, idx, event_id, event_type, payload, created_at,
                       cause_consumer, cause_lane, cause_index, cause_attempt)
select k.session_id, k.idx, k.event_id, k.event_type, k.payload::json, %(now)s::timestamptz,
       k.cause_consumer, k.cause_lane, k.cause_index, k.cause_attempt
  from unnest(%(session_ids)s::text[], %(idxs)s::bigint[], %(event_ids)s::text[],
              %(types)s::text[], %(payloads)s::text[], %(cause_consumers)s::text[],
              %(cause_lanes)s::text[], %(cause_indexes)s::bigint[],
              %(cause_attempts)s::int[])
       as k (session_id, idx, event_id, event_type, payload, cause_consumer, cause_lane,
             cause_index, cause_attempt);

-- name: insert_event_cursors
insert into a2_cursors (session_id, consumer, cursor_key, kind, lane, position, head, ready_at)
select k.session_id, k.consumer, k.cursor_key, 'event', null, k.idx - 1, k.idx,
       %(now)s::timestamptz
  from unnest(%(session_ids)s::text[], %(consumers)s::text[], %(keys)s::text[],
              %(idxs)s::bigint[]) as k (session_id, consumer, cursor_key, idx);

-- name: insert_lane_events
insert into a2_lane_events (session_id, consumer, lane, idx)
select k.session_id, k.consumer, k.lane, k.idx
  from unnest(%(session_ids)s::text[], %(consumers)s::text[], %(lanes)s::text[],
              %(idxs)s::bigint[]) as k (session_id, consumer, lane, idx)
on conflict do nothing;

-- name: queue_lane_heads
-- An idle lane cursor (or one left below the clear marker) takes the lane's first new
-- event; a busy one keeps its head and reaches the new events when it advances.
insert into a2_cursors as c (session_id, consumer, cursor_key, kind, lane, position, head,
                             ready_at)
select k.session_id, k.consumer, k.cursor_key, 'lane', k.lane, s.clear_index, k.idx,
       %(now)s::timestamptz
  from unnest(%(session_ids)s::text[], %(consumers)s::text[], %(keys)s::text[],
              %(lanes)s::text[], %(idxs)s::bigint[])
       as k (session_id, consumer, cursor_key, lane, idx)
  join a2_sessions s on s.session_id = k.session_id
on conflict (session_id, consumer, cursor_key) do update set
  head = excluded.head,
  position = greatest(c.position, excluded.position),
  ready_at = excluded.ready_at,
  attempt_count = 0, first_claimed_at = null, last_claimed_at = null, claim_holder = null,
  claim_expires_at = null, failure_count = 0, last_failed_at = null,
  last_failed_attempt = null, last_error = null, failed_at = null
where c.head is null or c.head <= excluded.position;

-- name: refresh_log_types
-- Records each declared log consumer's types on its cursor (the seeds' refreshLogTypes).
update a2_cursors c
   set types = k.types
  from (select u.session_id, u.consumer, u.cursor_key,
               case when u.types_json is null then null
                    else array(select json_array_elements_text(u.types_json::json)) end
               as types
          from unnest(%(session_ids)s::text[], %(consumers)s::text[], %(keys)s::text[],
                      %(types)s::text[]) as u (session_id, consumer, cursor_key, types_json)) k
 where c.session_id = k.session_id and c.consumer = k.consumer
   and c.cursor_key = k.cursor_key and c.kind = 'log'
   and c.types is distinct from k.types;

-- name: wake_log_cursors
-- A missing log cursor opens at `position` and takes its first event after it; an
-- existing one records its types and, when idle, takes its next event of them.
with k as (
  select u.session_id, u.consumer, u.cursor_key, u.lane, u.position,
         case when u.types_json is null then null
              else array(select json_array_elements_text(u.types_json::json)) end as types
    from unnest(%(session_ids)s::text[], %(consumers)s::text[], %(keys)s::text[],
                %(lanes)s::text[], %(types)s::text[], %(positions)s::bigint[])
         as u (session_id, consumer, cursor_key, lane, types_json, position)
), woken as (
  select k.*, (select min(e.idx)
                 from a2_events e
                where e.session_id = k.session_id
                  and e.idx > coalesce(cur.position, k.position)
                  and e.event_type <> 'a2.cleared'
                  and (k.types is null or e.event_type = any(k.types))) as next_head
    from k
    left join a2_cursors cur
      on cur.session_id = k.session_id and cur.consumer = k.consumer
     and cur.cursor_key = k.cursor_key
)
insert into a2_cursors as c (session_id, consumer, cursor_key, kind, lane, position, head,
                             types, ready_at)
select w.session_id, w.consumer, w.cursor_key, 'log', w.lane, w.position, w.next_head,
       w.types, case when w.next_head is null then null else %(now)s::timestamptz end
  from woken w
on conflict (session_id, consumer, cursor_key) do update set
  types = excluded.types,
  head = coalesce(c.head, excluded.head),
  ready_at = case when c.head is null then excluded.ready_at else c.ready_at end
where c.kind = 'log';

-- name: finish_lane_events
update a2_lane_events l
   set done = true,
       completed_attempt = k.attempt,
       returned_event_ids = case when k.returned is null then null
                                 else array(select json_array_elements_text(k.returned::json)) end
  from unnest(%(session_ids)s::text[], %(consumers)s::text[], %(lanes)s::text[],
              %(idxs)s::bigint[], %(attempts)s::int[], %(returned)s::text[])
       as k (session_id, consumer, lane, idx, attempt, returned)
 where l.session_id = k.session_id and l.consumer = k.consumer and l.lane = k.lane
   and l.idx = k.idx;

-- name: advance_cursors
-- Moves each cursor past its finished head (fenced on that head): an event cursor goes
-- idle, a lane takes its next unfinished queued event, a log cursor its next event of
-- its types. `record` keeps the completion on event and log cursors for retries.
with k as (
  select *
    from unnest(%(session_ids)s::text[], %(consumers)s::text[], %(keys)s::text[],
                %(heads)s::bigint[], %(record)s::boolean[], %(attempts)s::int[],
                %(returned)s::text[])
         as u (session_id, consumer, cursor_key, head, record, attempt, returned)
), moved as (
  select c.session_id, c.consumer, c.cursor_key, k.record, k.attempt, k.returned,
         case c.kind
           when 'event' then null::bigint
           when 'lane' then
             (select min(l.idx)
                from a2_lane_events l
               where l.session_id = c.session_id and l.consumer = c.consumer
                 and l.lane = c.lane and not l.done
                 and l.idx > greatest(c.head, s.clear_index))
           else
             (select min(e.idx)
                from a2_events e
               where e.session_id = c.session_id and e.idx > c.head
                 and e.event_type <> 'a2.cleared'
                 and (c.types is null or e.event_type = any(c.types)))
         end as next_head
    from k
    join a2_cursors c
      on c.session_id = k.session_id and c.consumer = k.consumer
     and c.cursor_key = k.cursor_key and c.head = k.head
    join a2_sessions s on s.session_id = c.session_id
)
update a2_cursors c
   set position = c.head,
       head = m.next_head,
       ready_at = case when m.next_head is null then null else %(now)s::timestamptz end,
       attempt_count = 0, first_claimed_at = null, last_claimed_at = null,
       claim_holder = null, claim_expires_at = null, failure_count = 0,
       last_failed_at = null, last_failed_attempt = null, last_error = null,
       failed_at = null,
       completed_idx = case when m.record then c.head else c.completed_idx end,
       completed_attempt = case when m.record then m.attempt else c.completed_attempt end,
       returned_event_ids = case
         when not m.record then c.returned_event_ids
         when m.returned is null then null
         else array(select json_array_elements_text(m.returned::json)) end
  from moved m
 where c.session_id = m.session_id and c.consumer = m.consumer
   and c.cursor_key = m.cursor_key;

-- name: complete_fenced
-- The fast path of complete_attempts: completions returning no events, each fenced on
-- its exact attempt (re-checked on the row as locked). If any misses its fence the
-- statement fails with the marker below and the transaction rolls back; the caller then
-- judges the batch one by one.
with k as (
  select *
    from unnest(%(session_ids)s::text[], %(consumers)s::text[], %(keys)s::text[],
                %(heads)s::bigint[], %(attempts)s::int[])
         as u (session_id, consumer, cursor_key, head, attempt)
), moved as (
  select c.session_id, c.consumer, c.cursor_key, c.kind, c.lane, c.head, k.attempt,
         case c.kind
           when 'event' then null::bigint
           when 'lane' then
             (select min(l.idx)
                from a2_lane_events l
               where l.session_id = c.session_id and l.consumer = c.consumer
                 and l.lane = c.lane and not l.done
                 and l.idx > greatest(c.head, s.clear_index))
           else
             (select min(e.idx)
                from a2_events e
               where e.session_id = c.session_id and e.idx > c.head
                 and e.event_type <> 'a2.cleared'
                 and (c.types is null or e.event_type = any(c.types)))
         end as next_head
    from k
    join a2_cursors c
      on c.session_id = k.session_id and c.consumer = k.consumer
     and c.cursor_key = k.cursor_key and c.head = k.head
    join a2_sessions s on s.session_id = c.session_id
   where c.attempt_count = k.attempt and c.claim_holder is not null
     and c.failed_at is null and c.head > s.clear_index
), advanced as (
  update a2_cursors c
     set position = c.head,
         head = m.next_head,
         ready_at = case when m.next_head is null then null
                         else coalesce(%(now)s::timestamptz, now()) end,
         attempt_count = 0, first_claimed_at = null, last_claimed_at = null,
         claim_holder = null, claim_expires_at = null, failure_count = 0,
         last_failed_at = null, last_failed_attempt = null, last_error = null,
         failed_at = null,
         completed_idx = case when m.kind = 'lane' then c.completed_idx else c.head end,
         completed_attempt = case when m.kind = 'lane' then c.completed_attempt
                                  else m.attempt end,
         returned_event_ids = case when m.kind = 'lane' then c.returned_event_ids
                                   else array[]::text[] end
    from moved m
   where c.session_id = m.session_id and c.consumer = m.consumer
     and c.cursor_key = m.cursor_key and c.head = m.head
     and c.attempt_count = m.attempt and c.claim_holder is not null and c.failed_at is null
  returning c.session_id
), lanes as (
  update a2_lane_events l
     set done = true, completed_attempt = m.attempt, returned_event_ids = array[]::text[]
    from moved m
   where m.kind = 'lane' and l.session_id = m.session_id and l.consumer = m.consumer
     and l.lane = m.lane and l.idx = m.head
  returning 1
)
select (case when count(*) = %(count)s then null
             else 'a2pg: a completion missed its fence' end)::int as missed
  from advanced;

-- name: release_pins
-- A finished, skipped or dead head's snapshot pins, and the history no other pin keeps.
with k as (
  select *
    from unnest(%(session_ids)s::text[], %(consumers)s::text[], %(keys)s::text[],
                %(idxs)s::bigint[]) as u (session_id, consumer, cursor_key, event_index)
), released as (
  delete from a2_snapshot_pins p
   using k
   where p.session_id = k.session_id and p.consumer = k.consumer
     and p.cursor_key = k.cursor_key and p.event_index = k.event_index
  returning p.session_id, p.consumer, p.cursor_key, p.event_index, p.reducer, p.up_to_index
)
delete from a2_snapshot_history h
 using (select distinct session_id, reducer, up_to_index from released) r
 where h.session_id = r.session_id and h.reducer = r.reducer
   and h.up_to_index = r.up_to_index
   and not exists (
     select 1
       from a2_snapshot_pins p
      where p.session_id = h.session_id and p.reducer = h.reducer
        and p.up_to_index = h.up_to_index
        and not exists (
          select 1 from released x
           where x.session_id = p.session_id and x.consumer = p.consumer
             and x.cursor_key = p.cursor_key and x.event_index = p.event_index
             and x.reducer = p.reducer and x.up_to_index = p.up_to_index));

-- name: set_session_heads
update a2_sessions s
   set head = k.head
  from unnest(%(session_ids)s::text[], %(heads)s::bigint[]) as k (session_id, head)
 where s.session_id = k.session_id;

-- name: notify_ready
-- At most one notification per session per transaction, only where this transaction
-- made a head claimable (its ready_at is this transaction's time) or `forced`; returns
-- the sessions notified.
select s.session_id,
       pg_notify(%(channel)s,
                 json_build_object('session_id', s.session_id, 'head', s.head)::text)
  from a2_sessions s
 where s.session_id = any(%(session_ids)s::text[])
   and (s.session_id = any(%(forced)s::text[])
        or exists (select 1 from a2_cursors c
                    where c.ready_at = coalesce(%(now)s::timestamptz, now())
                      and c.session_id = s.session_id));


-- Claims ----------------------------------------------------------------------------

-- name: claim_session
-- Claims every eligible head of one session (the caller holds the session row). A
-- lapsed claim counts a failure; reaching max_failures dead-letters the head instead.
with t as (
  select coalesce(%(now)s::timestamptz, now()) as now
), s as (
  select clear_index from a2_sessions where session_id = %(session_id)s
), eligible as (
  select c.session_id, c.consumer, c.cursor_key,
         c.claim_holder is not null and %(max_failures)s::int is not null
           and c.failure_count + 1 >= %(max_failures)s::int as exhausted
    from a2_cursors c
   where c.session_id = %(session_id)s
     and c.head > (select clear_index from s)
     and c.failed_at is null
     and (%(through)s::bigint is null or c.head <= %(through)s::bigint)
     and (%(names)s::text[] is null or c.consumer = any(%(names)s::text[]))
     and not exists (
       select 1
         from unnest(%(ex_consumers)s::text[], %(ex_keys)s::text[], %(ex_idxs)s::bigint[])
              as x (consumer, cursor_key, idx)
        where x.consumer = c.consumer and x.cursor_key = c.cursor_key and x.idx = c.head)
     and (c.claim_expires_at is null or c.claim_expires_at <= (select now from t))
   order by c.head, c.consumer collate "C", c.cursor_key collate "C"
     for update of c
), claimed as (
  update a2_cursors c
     set attempt_count = c.attempt_count + 1,
         failure_count = c.failure_count + case when c.claim_holder is null then 0 else 1 end,
         first_claimed_at = case when g.exhausted then c.first_claimed_at
                                 else coalesce(c.first_claimed_at, t.now) end,
         last_claimed_at = case when g.exhausted then c.last_claimed_at
                                else t.now end,
         claim_holder = case when g.exhausted then null else %(holder)s end,
         claim_expires_at = case when g.exhausted then null
                                 else t.now + %(ttl)s::interval end,
         failed_at = case when g.exhausted then t.now end,
         ready_at = case when g.exhausted then null
                         else t.now + %(ttl)s::interval end
    from eligible g cross join t
   where c.session_id = g.session_id and c.consumer = g.consumer
     and c.cursor_key = g.cursor_key
  returning c.*, g.exhausted
), released as (
  delete from a2_snapshot_pins p
   using claimed k
   where k.exhausted and p.session_id = k.session_id and p.consumer = k.consumer
     and p.cursor_key = k.cursor_key and p.event_index = k.head
  returning p.session_id, p.consumer, p.cursor_key, p.event_index, p.reducer, p.up_to_index
), history as (
  delete from a2_snapshot_history h
   using (select distinct session_id, reducer, up_to_index from released) r
   where h.session_id = r.session_id and h.reducer = r.reducer
     and h.up_to_index = r.up_to_index
     and not exists (
       select 1
         from a2_snapshot_pins p
        where p.session_id = h.session_id and p.reducer = h.reducer
          and p.up_to_index = h.up_to_index
          and not exists (
            select 1 from released x
             where x.session_id = p.session_id and x.consumer = p.consumer
               and x.cursor_key = p.cursor_key and x.event_index = p.event_index
               and x.reducer = p.reducer and x.up_to_index = p.up_to_index))
  returning 1
)
select k.*, (select clear_index from s) as clear_index,
       e.event_id as e_event_id, e.event_type as e_event_type, e.payload as e_payload,
       e.created_at as e_created_at, e.cause_consumer as e_cause_consumer,
       e.cause_lane as e_cause_lane, e.cause_index as e_cause_index,
       e.cause_attempt as e_cause_attempt
  from claimed k
  join a2_events e on e.session_id = k.session_id and e.idx = k.head
 order by k.head, k.consumer collate "C", coalesce(k.lane, '') collate "C",
          k.cursor_key collate "C";

-- name: busy_until
-- Nothing was eligible: the earliest expiry among held or backing-off heads, if any.
select min(c.claim_expires_at) as retry_at
  from a2_cursors c
 where c.session_id = %(session_id)s
   and c.head > (select s.clear_index from a2_sessions s
                  where s.session_id = %(session_id)s)
   and c.failed_at is null
   and (%(through)s::bigint is null or c.head <= %(through)s::bigint)
   and (%(names)s::text[] is null or c.consumer = any(%(names)s::text[]))
   and not exists (
     select 1
       from unnest(%(ex_consumers)s::text[], %(ex_keys)s::text[], %(ex_idxs)s::bigint[])
            as x (consumer, cursor_key, idx)
      where x.consumer = c.consumer and x.cursor_key = c.cursor_key and x.idx = c.head)
   and c.claim_expires_at > coalesce(%(now)s::timestamptz, now());

-- name: claim_any
-- The oldest ready heads of every session, in one statement. An index range scan on
-- ready_at (a2_cursors_ready) with an incremental sort for the tie-breakers; the LIMIT
-- is a literal ({limit}), and no parameter changes the plan, so even the generic plan
-- psycopg's preparation may settle on walks the index (tests/postgres/test_plans.py).
-- SKIP LOCKED: concurrent claimers never wait on each other nor get the same head.
with t as (
  select coalesce(%(now)s::timestamptz, statement_timestamp()) as now
), picked as (
  select c.session_id, c.consumer, c.cursor_key, c.ready_at as was_ready,
         c.claim_holder is not null and %(max_failures)s::int is not null
           and c.failure_count + 1 >= %(max_failures)s::int as exhausted
    from a2_cursors c
   where c.ready_at <= (select now from t)
     and (%(names)s::text[] is null or c.consumer = any(%(names)s::text[]))
   order by c.ready_at, c.session_id collate "C", c.head, c.consumer collate "C",
            coalesce(c.lane, '') collate "C"
   limit {limit}
     for update of c skip locked
), claimed as (
  update a2_cursors c
     set attempt_count = c.attempt_count + 1,
         failure_count = c.failure_count + case when c.claim_holder is null then 0 else 1 end,
         first_claimed_at = case when g.exhausted then c.first_claimed_at
                                 else coalesce(c.first_claimed_at, t.now) end,
         last_claimed_at = case when g.exhausted then c.last_claimed_at else t.now end,
         claim_holder = case when g.exhausted then null else %(holder)s end,
         claim_expires_at = case when g.exhausted then null
                                 else t.now + %(ttl)s::interval end,
         failed_at = case when g.exhausted then t.now end,
         ready_at = case when g.exhausted then null else t.now + %(ttl)s::interval end
    from picked g cross join t
   where c.session_id = g.session_id and c.consumer = g.consumer
     and c.cursor_key = g.cursor_key
     and c.ready_at <= t.now and c.failed_at is null
  returning c.*, g.exhausted, g.was_ready
), released as (
  delete from a2_snapshot_pins p
   using claimed k
   where k.exhausted and p.session_id = k.session_id and p.consumer = k.consumer
     and p.cursor_key = k.cursor_key and p.event_index = k.head
  returning p.session_id, p.consumer, p.cursor_key, p.event_index, p.reducer, p.up_to_index
), history as (
  delete from a2_snapshot_history h
   using (select distinct session_id, reducer, up_to_index from released) r
   where h.session_id = r.session_id and h.reducer = r.reducer
     and h.up_to_index = r.up_to_index
     and not exists (
       select 1
         from a2_snapshot_pins p
        where p.session_id = h.session_id and p.reducer = h.reducer
          and p.up_to_index = h.up_to_index
          and not exists (
            select 1 from released x
             where x.session_id = p.session_id and x.consumer = p.consumer
               and x.cursor_key = p.cursor_key and x.event_index = p.event_index
               and x.reducer = p.reducer and x.up_to_index = p.up_to_index))
  returning 1
)
select k.*, s.clear_index,
       e.event_id as e_event_id, e.event_type as e_event_type, e.payload as e_payload,
       e.created_at as e_created_at, e.cause_consumer as e_cause_consumer,
       e.cause_lane as e_cause_lane, e.cause_index as e_cause_index,
       e.cause_attempt as e_cause_attempt
  from claimed k
  join a2_sessions s on s.session_id = k.session_id
  join a2_events e on e.session_id = k.session_id and e.idx = k.head
 order by k.was_ready, k.session_id collate "C", k.head, k.consumer collate "C",
          coalesce(k.lane, '') collate "C";

-- name: renew_claims
-- Extends the live claims of `holder` at exactly these attempts. Heads at or below the
-- clear index stay parked (ready_at null): a renewal must not hand them to claim_any.
update a2_cursors c
   set claim_expires_at = coalesce(%(now)s::timestamptz, now()) + %(ttl)s::interval,
       ready_at = coalesce(%(now)s::timestamptz, now()) + %(ttl)s::interval
  from unnest(%(consumers)s::text[], %(keys)s::text[], %(idxs)s::bigint[],
              %(attempts)s::int[]) as k (consumer, cursor_key, idx, attempt)
 where c.session_id = %(session_id)s and c.consumer = k.consumer
   and c.cursor_key = k.cursor_key and c.head = k.idx and c.attempt_count = k.attempt
   and c.failed_at is null and c.claim_holder = %(holder)s
   and c.claim_expires_at > coalesce(%(now)s::timestamptz, now())
   and c.head > (select s.clear_index from a2_sessions s where s.session_id = %(session_id)s)
returning c.consumer, c.cursor_key, c.head;

-- name: release_claims
-- Hands back the claims of `holder` at exactly these attempts, lapsed or not: claimable
-- at once (ready_at is now) with no failure counted; attempt_count stays, so the next
-- claim fences the released attempt out. Heads at or below the clear index stay parked.
-- Notifies the session once when anything was released (an InitPlan: evaluated at most
-- once, and only when a released row is returned).
with released as (
  update a2_cursors c
     set claim_holder = null, claim_expires_at = null,
         ready_at = coalesce(%(now)s::timestamptz, now())
    from unnest(%(consumers)s::text[], %(keys)s::text[], %(idxs)s::bigint[],
                %(attempts)s::int[]) as k (consumer, cursor_key, idx, attempt)
   where c.session_id = %(session_id)s and c.consumer = k.consumer
     and c.cursor_key = k.cursor_key and c.head = k.idx and c.attempt_count = k.attempt
     and c.failed_at is null and c.claim_holder = %(holder)s
     and c.head > (select s.clear_index from a2_sessions s
                    where s.session_id = %(session_id)s)
  returning c.consumer, c.cursor_key, c.head
), notified as (
  select pg_notify(%(channel)s,
                   json_build_object('session_id', s.session_id, 'head', s.head)::text)
    from a2_sessions s
   where s.session_id = %(session_id)s and exists (select 1 from released)
)
select r.consumer, r.cursor_key, r.head, (select count(*) from notified) as notified
  from released r;

-- name: fail_head
update a2_cursors c
   set failure_count = %(failure_count)s::int,
       last_error = %(error)s,
       last_failed_at = %(now)s::timestamptz,
       last_failed_attempt = %(attempt)s::int,
       failed_at = case when %(dead)s::boolean then %(now)s::timestamptz end,
       claim_holder = null,
       claim_expires_at = %(retry_at)s::timestamptz,
       ready_at = case when %(dead)s::boolean then null
                       else coalesce(%(retry_at)s::timestamptz, %(now)s::timestamptz) end
 where c.session_id = %(session_id)s and c.consumer = %(consumer)s
   and c.cursor_key = %(cursor_key)s and c.head = %(idx)s::bigint
   and c.attempt_count = %(attempt)s::int;

-- name: dead_head
select c.*
  from a2_cursors c
 where c.session_id = %(session_id)s and c.consumer = %(consumer)s
   and c.head = %(idx)s::bigint and c.failed_at is not null
 order by c.cursor_key collate "C"
 limit 1
   for update;

-- name: retry_head
update a2_cursors c
   set failed_at = null, failure_count = 0, ready_at = %(now)s::timestamptz
 where c.session_id = %(session_id)s and c.consumer = %(consumer)s
   and c.cursor_key = %(cursor_key)s and c.head = %(idx)s::bigint;


-- Clear and reclaim -------------------------------------------------------------------

-- name: mark_cleared
update a2_sessions set head = %(marker)s::bigint, clear_index = %(marker)s::bigint
 where session_id = %(session_id)s;

-- name: restart_log_cursors
update a2_cursors
   set position = %(marker)s::bigint, head = null, ready_at = null,
       attempt_count = 0, first_claimed_at = null, last_claimed_at = null,
       claim_holder = null, claim_expires_at = null, failure_count = 0,
       last_failed_at = null, last_failed_attempt = null, last_error = null,
       failed_at = null, completed_idx = null, completed_attempt = null,
       returned_event_ids = null
 where session_id = %(session_id)s and kind = 'log';

-- name: park_cursors
-- Event and lane heads below the marker are dropped from claims (rows stay until
-- reclaim; a lane cursor below the marker restarts with its next event).
update a2_cursors set ready_at = null
 where session_id = %(session_id)s and kind <> 'log' and ready_at is not null;

-- name: drop_pins
with pins as (
  delete from a2_snapshot_pins where session_id = %(session_id)s returning 1
)
delete from a2_snapshot_history where session_id = %(session_id)s;

-- name: reclaim_batch
-- Up to `batch` of the oldest events below the clear marker, with their lane records
-- and finished event cursors.
with doomed as (
  select idx from a2_events
   where session_id = %(session_id)s and idx < %(clear_index)s::bigint
   order by idx
   limit %(batch)s::bigint
), gone as (
  delete from a2_events e
   using doomed d
   where e.session_id = %(session_id)s and e.idx = d.idx
  returning e.idx
), bound as (
  select count(*) as deleted, max(idx) as through from gone
), lanes as (
  delete from a2_lane_events l
   using bound b
   where l.session_id = %(session_id)s and l.idx <= b.through
  returning 1
), cursors as (
  delete from a2_cursors c
   using bound b
   where c.session_id = %(session_id)s and c.kind = 'event' and c.position < b.through
  returning 1
)
select b.deleted,
       not exists (select 1 from a2_events e
                    where e.session_id = %(session_id)s and e.idx < %(clear_index)s::bigint
                      and e.idx > coalesce(b.through, 0)) as done
  from bound b;

-- name: reclaim_finish
-- Nothing is left below the marker: dead cursors, snapshots, history and pins go too.
with cursors as (
  delete from a2_cursors
   where session_id = %(session_id)s and kind <> 'log'
     and (head is null or head <= %(clear_index)s::bigint)
     and position <= %(clear_index)s::bigint
  returning 1
), pins as (
  delete from a2_snapshot_pins
   where session_id = %(session_id)s and up_to_index < %(clear_index)s::bigint
  returning 1
), history as (
  delete from a2_snapshot_history
   where session_id = %(session_id)s and up_to_index < %(clear_index)s::bigint
  returning 1
)
delete from a2_snapshots
 where session_id = %(session_id)s and up_to_index < %(clear_index)s::bigint;


-- Snapshots ---------------------------------------------------------------------------

-- name: snapshot_head
select up_to_index from a2_snapshots
 where session_id = %(session_id)s and reducer = %(reducer)s;

-- name: pinned_checkpoints
select distinct up_to_index from a2_snapshot_pins
 where session_id = %(session_id)s and reducer = %(reducer)s;

-- name: insert_pins
insert into a2_snapshot_pins (session_id, consumer, cursor_key, event_index, reducer,
                              up_to_index)
select %(session_id)s, k.consumer, k.cursor_key, k.event_index, %(reducer)s, k.up_to_index
  from unnest(%(consumers)s::text[], %(keys)s::text[], %(idxs)s::bigint[],
              %(up_to)s::bigint[]) as k (consumer, cursor_key, event_index, up_to_index)
on conflict do nothing;

-- name: archive_snapshot_head
-- The stored head snapshot moves to history (a newer one replaces it and a pin keeps it).
insert into a2_snapshot_history as h (session_id, reducer, up_to_index, state, updated_at)
select session_id, reducer, up_to_index, state, updated_at
  from a2_snapshots
 where session_id = %(session_id)s and reducer = %(reducer)s
   and up_to_index = %(up_to)s::bigint
on conflict (session_id, reducer, up_to_index) do update
  set state = excluded.state, updated_at = excluded.updated_at;

-- name: put_history
insert into a2_snapshot_history as h (session_id, reducer, up_to_index, state, updated_at)
select %(session_id)s, %(reducer)s, k.up_to_index, k.state::json, %(now)s::timestamptz
  from unnest(%(up_to)s::bigint[], %(states)s::text[]) as k (up_to_index, state)
on conflict (session_id, reducer, up_to_index) do update
  set state = excluded.state, updated_at = excluded.updated_at;

-- name: put_snapshot_head
insert into a2_snapshots as h (session_id, reducer, up_to_index, state, updated_at)
values (%(session_id)s, %(reducer)s, %(up_to)s::bigint, %(state)s::json, %(now)s::timestamptz)
on conflict (session_id, reducer) do update
  set up_to_index = excluded.up_to_index, state = excluded.state,
      updated_at = excluded.updated_at;


-- Consumer registry -------------------------------------------------------------------

-- name: register_consumers
insert into a2_consumers as r (name, lane, types, backfill, registered_at, updated_at)
select k.name, k.lane,
       case when k.types_json is null then null
            else array(select json_array_elements_text(k.types_json::json)) end,
       k.backfill, n.now, n.now
  from unnest(%(names)s::text[], %(lanes)s::text[], %(types)s::text[],
              %(backfills)s::boolean[]) as k (name, lane, types_json, backfill)
 cross join (select coalesce(%(now)s::timestamptz, statement_timestamp()) as now) n
on conflict (name) do update
  set lane = excluded.lane, types = excluded.types, backfill = excluded.backfill,
      updated_at = excluded.updated_at
where (r.lane, r.types, r.backfill)
      is distinct from (excluded.lane, excluded.types, excluded.backfill);

-- name: unregister_consumers
delete from a2_consumers where name = any(%(names)s::text[]);


-- Presence ----------------------------------------------------------------------------

-- name: presence_write
-- Last writer wins per field by `at`, unless the stored value has expired.
insert into a2_presence as p (ns, participant, field, value, seen, at, expires_at)
select %(ns)s, %(participant)s, k.field, k.value::json, %(seen)s::json, %(at)s::timestamptz,
       n.now + %(ttl)s::interval
  from unnest(%(fields)s::text[], %(values)s::text[]) as k (field, value)
 cross join (select coalesce(%(now)s::timestamptz, statement_timestamp()) as now) n
on conflict (ns, participant, field) do update
  set value = excluded.value, seen = excluded.seen, at = excluded.at,
      expires_at = excluded.expires_at
where p.at <= excluded.at
   or p.expires_at <= coalesce(%(now)s::timestamptz, statement_timestamp())
returning field;

-- name: presence_read
-- Sweeps expired rows and returns the live, non-null fields.
with n as (
  select coalesce(%(now)s::timestamptz, statement_timestamp()) as now
), swept as (
  delete from a2_presence p
   using n
   where p.ns = %(ns)s and p.expires_at <= n.now
  returning 1
)
select p.participant, p.field, p.value, p.seen, p.at, p.expires_at
  from a2_presence p
 cross join n
 where p.ns = %(ns)s and p.expires_at > n.now and json_typeof(p.value) <> 'null'
 order by p.participant collate "C", p.field collate "C";
