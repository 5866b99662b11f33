-- Outcomes of attempts: cursors advanced past their heads, lane records finished,
-- failures, dead letters and their redrive. Conventions: README.md beside this file.

-- fragment: no_attempts
-- The last assignments of an update that gives a cursor a new head (or none): no
-- attempts, claim or failures carry over to it. The including statement sets
-- `claim_expires_at` itself: null, or a delayed target's due time (rules.due_at).
attempt_count = 0, first_claimed_at = null, last_claimed_at = null, last_ready_at = null,
claim_holder = null, failure_count = 0,
last_failed_at = null, last_failed_attempt = null, last_error = null,
failed_at = null

-- name: select_lane_event
select l.* from a2_lane_events l
 where l.session_id = :session_id and l.consumer = :consumer and l.lane = :lane
   and l.idx = :idx;

-- name: finish_lane_event
update a2_lane_events
   set done = 1, completed_attempt = :attempt, returned_event_ids = :returned
 where session_id = :session_id and consumer = :consumer and lane = :lane and idx = :idx;

-- name: next_lane_head
-- The lane's first unfinished queued event after `:after` (no row: none), and the time
-- it is held until (a delayed target's).
select l.idx as next, l.not_before as due
  from a2_lane_events l
 where l.session_id = :session_id and l.consumer = :consumer and l.lane = :lane
   and l.done = 0 and l.idx > :after
 order by l.idx
 limit 1;

-- name: move_cursor
-- A cursor past its head: `position` is the finished head, `head` the next (or none).
update a2_cursors
   set position = head,
       head = :next,
       ready_at = case when :next is null then null else coalesce(:due, :now) end,
       claim_expires_at = :due,
       -- include: no_attempts
 where session_id = :session_id and consumer = :consumer and cursor_key = :cursor_key;

-- name: record_completion
-- How an event or log cursor's last head was completed, for retried completions.
update a2_cursors
   set completed_idx = :idx, completed_attempt = :attempt, returned_event_ids = :returned
 where session_id = :session_id and consumer = :consumer and cursor_key = :cursor_key;

-- name: fail_head
update a2_cursors
   set failure_count = :failure_count,
       last_error = :error,
       last_failed_at = :now,
       last_failed_attempt = :attempt,
       failed_at = case when :dead then :now end,
       claim_holder = null,
       claim_expires_at = :retry_at,
       ready_at = case when :dead then null else coalesce(:retry_at, :now) end
 where session_id = :session_id and consumer = :consumer and cursor_key = :cursor_key
   and head = :idx and attempt_count = :attempt;

-- name: dead_letters
select
       -- include: head_columns
  from a2_cursors c
  join a2_events e on e.session_id = c.session_id and e.idx = c.head
  left join a2_clears k on k.session_id = c.session_id
 where c.session_id = :session_id
   and c.failed_at is not null
   and c.head > coalesce(k.clear_index, 0)
 order by c.head, c.consumer, coalesce(c.lane, '');

-- name: dead_cursors_at
-- redrive: the consumer's dead cursors whose head is `:idx`, as dead_letters lists them.
select c.*
  from a2_cursors c
 where c.session_id = :session_id and c.consumer = :consumer
   and c.head = :idx and c.failed_at is not null
 order by coalesce(c.lane, '');

-- name: retry_head
update a2_cursors
   set failed_at = null, failure_count = 0, ready_at = :now
 where session_id = :session_id and consumer = :consumer and cursor_key = :cursor_key
   and head = :idx;

-- name: live_cursors_at
-- cancel_head: the consumer's live cursors (not dead-lettered) whose head is `:idx`.
select c.*
  from a2_cursors c
 where c.session_id = :session_id and c.consumer = :consumer
   and c.head = :idx and c.failed_at is null
 order by coalesce(c.lane, '');

-- name: cancel_dead_letter
-- cancel_head's dead_letter: dead from now, its claim (if any) gone, so the attempt still
-- running is superseded; no failure is counted.
update a2_cursors
   set failed_at = :now, last_error = :error,
       claim_holder = null, claim_expires_at = null, ready_at = null
 where session_id = :session_id and consumer = :consumer and cursor_key = :cursor_key
   and head = :idx;

-- name: hold_cursor_until
-- After cancel_head skipped a head under a live lease: the cursor's next head (if any)
-- is held back until that lease would have lapsed, as a delay holds it.
update a2_cursors
   set ready_at = max(ready_at, :until),
       claim_expires_at = max(coalesce(claim_expires_at, :until), :until)
 where session_id = :session_id and consumer = :consumer and cursor_key = :cursor_key
   and head is not null and failed_at is null and claim_holder is null;
