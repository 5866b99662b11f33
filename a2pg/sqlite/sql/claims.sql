-- Claims: a session's eligible heads, the oldest ready heads of all sessions, leases
-- claimed, renewed and released, and the sessions a wakeups poll finds ready.
-- Conventions: README.md beside this file.

-- fragment: head_columns
-- A cursor row `c`, its head event `e` (the `e_` columns codec.head reads) and its
-- session's clear index (`k`, a2_clears, left joined).
c.*, e.idx as e_idx, e.event_id as e_event_id, e.event_type as e_event_type,
e.payload as e_payload, e.created_at as e_created_at, e.cause as e_cause,
e.trace_parent as e_trace_parent, coalesce(k.clear_index, 0) as clear_index

-- fragment: not_paused
-- `c.consumer` is not paused (a2_consumer_pauses): the subquery is not correlated, so
-- SQLite reads the paused names once per statement.
c.consumer not in (select p.consumer from a2_consumer_pauses p)

-- name: live_heads
-- claim_available: the session's heads above the clear index that are not dead-lettered,
-- of consumers not paused (neither claimed nor counted for Busy), in claim order; the
-- caller filters them as the contract says.
select c.*
  from a2_cursors c
 where c.session_id = :session_id and c.head > :clear_index and c.failed_at is null
   and
       -- include: not_paused
 order by c.head, c.consumer, coalesce(c.lane, '');

-- name: claim_head
-- Claims one eligible head. A lapsed claim (holder still set: its worker died) counts a
-- failure; reaching `:max_failures` dead-letters the head instead (not ready any more).
update a2_cursors
   set attempt_count = attempt_count + 1,
       failure_count = failure_count + (claim_holder is not null),
       first_claimed_at = case when x.exhausted then first_claimed_at
                               else coalesce(first_claimed_at, :now) end,
       last_claimed_at = case when x.exhausted then last_claimed_at else :now end,
       last_ready_at = case when x.exhausted then last_ready_at else ready_at end,
       claim_holder = case when x.exhausted then null else :holder end,
       claim_expires_at = case when x.exhausted then null else :expires_at end,
       failed_at = case when x.exhausted then :now end,
       ready_at = case when x.exhausted then null else :expires_at end
  from (select c.claim_holder is not null and :max_failures is not null
                 and c.failure_count + 1 >= :max_failures as exhausted
          from a2_cursors c
         where c.session_id = :session_id and c.consumer = :consumer
           and c.cursor_key = :cursor_key) x
 where session_id = :session_id and consumer = :consumer and cursor_key = :cursor_key
-- RETURNING gives plain columns only: SQLite 3.40 answers `failed_at is not null` there
-- wrongly (true for a NULL) on this table.
returning failed_at, head;

-- name: head_row
select
       -- include: head_columns
  from a2_cursors c
  join a2_events e on e.session_id = c.session_id and e.idx = c.head
  left join a2_clears k on k.session_id = c.session_id
 where c.session_id = :session_id and c.consumer = :consumer and c.cursor_key = :cursor_key;

-- name: ready_heads
-- claim_any: the oldest ready heads of every session, served consumers only, paused ones
-- apart. The order is a2_cursors_ready's, so this walks that index and stops at the limit
-- (no sort).
select c.session_id, c.consumer, c.cursor_key
  from a2_cursors c
 where c.ready_at is not null and c.ready_at <= :now
   and
       -- include: served
   and
       -- include: not_paused
 order by c.ready_at, c.session_id, c.head, c.consumer, coalesce(c.lane, '')
 limit :limit;

-- name: renew_claim
update a2_cursors
   set claim_expires_at = :expires_at, ready_at = :expires_at
 where session_id = :session_id and consumer = :consumer and cursor_key = :cursor_key;

-- name: release_claim
-- Handed back: claimable at once, no failure counted; attempt_count stays, so the next
-- claim fences the released attempt out.
update a2_cursors
   set claim_holder = null, claim_expires_at = null, ready_at = :now
 where session_id = :session_id and consumer = :consumer and cursor_key = :cursor_key;

-- name: ready_sessions
-- The sessions whose oldest heads are claimable now: what a wakeups poll announces. A
-- paused consumer's heads are not (no claim would take them, and a backlog of them would
-- hide every other session's from the poll).
select distinct r.session_id
  from (select c.session_id
          from a2_cursors c
         where c.ready_at is not null and c.ready_at <= :now
           and
               -- include: not_paused
         order by c.ready_at
         limit :limit) r;

-- name: still_ready
-- complete_and_claim: whether a head of the session made ready at `:now` is unclaimed.
select exists (select 1 from a2_cursors c
                where c.session_id = :session_id and c.ready_at = :now) as ready;

-- name: next_due
-- next_due_in: the soonest readiness still to come of the served consumers' heads (a
-- delay's, a backoff's or a lease's end), paused consumers' apart, in microseconds of the
-- store's clock; a walk of a2_cursors_ready from now on.
select min(c.ready_at) as due
  from a2_cursors c
 where c.ready_at > :now
   and
       -- include: served
   and
       -- include: not_paused
;
