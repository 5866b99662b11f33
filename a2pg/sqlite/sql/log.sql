-- The event log: a session's head and clear index, the writes of an append (events, event
-- and lane cursors, log cursors woken), reads of events and cursors, listings.
-- Conventions: README.md beside this file.

-- fragment: served
-- `c.consumer` is one of the JSON array `:names` (NULL: every consumer).
(:names is null or c.consumer in (select value from json_each(:names)))

-- name: session_head
-- A session's head (0 when it has no events) and clear index (0 when never cleared).
select coalesce((select max(e.idx) from a2_events e where e.session_id = :session_id), 0)
         as head,
       coalesce((select k.clear_index from a2_clears k where k.session_id = :session_id), 0)
         as clear_index;

-- name: read_events
-- `visible`: never below the clear marker (reads, and a stream's first look); a running
-- stream reads on from where it is, so a clear never makes it skip an index.
select e.*
  from a2_events e
 where e.session_id = :session_id
   and (not :visible
        or e.idx >= coalesce((select k.clear_index from a2_clears k
                               where k.session_id = :session_id), 0))
   and e.idx > :after
   and e.idx <= :through
   and (:types is null or e.event_type in (select value from json_each(:types)))
 order by e.idx
 limit :limit;

-- name: live_owners
-- The live events (at or above the clear marker, id not retired) holding any of the ids
-- of the JSON array `:ids`: one probe of the unique index of ids each (the unary + keeps
-- the planner off a range of the session's indexes).
select e.*
  from a2_events e
 where e.session_id = :session_id
   and e.event_id in (select value from json_each(:ids))
   and e.id_retired = 0
   and +e.idx >= :clear_index;

-- name: retire_ids
-- Events below the clear marker give up the ids the new events take (they stay, for
-- streams behind the clear, until reclaim).
update a2_events set id_retired = 1
 where session_id = :session_id
   and event_id in (select value from json_each(:ids))
   and id_retired = 0
   and idx < :clear_index;

-- name: insert_event
-- `:trace_parent`: the append's W3C trace context (null when there is none).
insert into a2_events (session_id, idx, event_type, payload, event_id, created_at, cause,
                       trace_parent)
values (:session_id, :idx, :event_type, :payload, :event_id, :created_at, :cause,
        :trace_parent);

-- name: select_cursor
select c.* from a2_cursors c
 where c.session_id = :session_id and c.consumer = :consumer and c.cursor_key = :cursor_key;

-- name: insert_event_cursor
-- `:due`: a delayed target's due time (else null), when the head becomes claimable.
insert into a2_cursors (session_id, consumer, cursor_key, lane, kind, position, head, ready_at,
                        claim_expires_at)
values (:session_id, :consumer, :cursor_key, null, 'event', :idx - 1, :idx,
        coalesce(:due, :now), :due);

-- name: insert_lane_event
insert into a2_lane_events (session_id, consumer, lane, idx, not_before)
values (:session_id, :consumer, :lane, :idx, :due)
on conflict do nothing;

-- name: queue_lane_head
-- A missing lane cursor starts at the clear index with this event as its head; an idle
-- one takes it, as does one left below the clear marker (the seed's store kept its lane
-- cursors there; a2pg's clear drops them, and migration 0002 the seed's); a busy one
-- keeps its head and reaches the event when it advances.
insert into a2_cursors as c (session_id, consumer, cursor_key, lane, kind, position, head,
                             ready_at, claim_expires_at)
values (:session_id, :consumer, :cursor_key, :lane, 'lane', :clear_index, :idx,
        coalesce(:due, :now), :due)
on conflict (session_id, consumer, cursor_key) do update set
  head = excluded.head,
  position = max(c.position, excluded.position),
  ready_at = excluded.ready_at,
  claim_expires_at = excluded.claim_expires_at,
  -- include: no_attempts
where c.head is null or c.head <= excluded.position;

-- name: open_log_cursor
insert into a2_cursors (session_id, consumer, cursor_key, lane, kind, position, head, types,
                        ready_at)
values (:session_id, :consumer, :cursor_key, :lane, 'log', :position, :head, :types,
        case when :head is null then null else :now end);

-- name: set_log_types
update a2_cursors set types = :types
 where session_id = :session_id and consumer = :consumer and cursor_key = :cursor_key
   and kind = 'log';

-- name: next_log_head
-- The first event after `:after` a log cursor of `:types` (NULL: all) takes: the primary
-- key walked from `:after`, stopping at the first match (no row: none yet).
select e.idx as next
  from a2_events e
 where e.session_id = :session_id and e.idx > :after
   and e.event_type <> 'a2.cleared'
   and (:types is null or e.event_type in (select value from json_each(:types)))
 order by e.idx
 limit 1;

-- name: set_head
-- A cursor's new head (or none): ready now, with no attempts, claim or failures.
update a2_cursors
   set head = :head,
       ready_at = case when :head is null then null else :now end,
       claim_expires_at = null,
       -- include: no_attempts
 where session_id = :session_id and consumer = :consumer and cursor_key = :cursor_key;

-- name: list_cursors
select c.*
  from a2_cursors c
 where c.session_id = :session_id
   and (c.kind = 'log'
        or c.head > :clear_index
        or (c.kind = 'lane' and c.head is null and c.position > :clear_index))
 order by c.consumer, c.lane is null, c.lane, c.head;

-- name: has_pending
select exists (
  select 1
    from a2_cursors c
   where c.session_id = :session_id
     and c.head > :clear_index
     and c.failed_at is null
     and
         -- include: served
) as has_pending;

-- name: sessions_page
-- Sessions are their events: one index range per page, then per session its heads above
-- the clear index (a2_cursors_heads), what its dead lanes and logs hold back, and its
-- newest event.
select s.session_id, s.head,
       coalesce(k.clear_index, 0) as clear_index,
       (select e.created_at from a2_events e
         where e.session_id = s.session_id and e.idx = s.head) as last_event_at,
       (select count(*) from a2_cursors c
         where c.session_id = s.session_id and c.head > coalesce(k.clear_index, 0)
           and c.failed_at is null) as pending,
       (select count(*) from a2_cursors c
         where c.session_id = s.session_id and c.head > coalesce(k.clear_index, 0)
           and c.failed_at is not null) as dead_letters,
       (select coalesce(sum(
                 -- include: blocked_behind
               ), 0)
          from a2_cursors c
         where c.session_id = s.session_id and c.head > coalesce(k.clear_index, 0)
           and c.failed_at is not null) as blocked
  from (select e.session_id, max(e.idx) as head
          from a2_events e
         where e.session_id > :after
         group by e.session_id
         order by e.session_id
         limit :limit) s
  left join a2_clears k on k.session_id = s.session_id
 order by s.session_id;
