-- Claims: every eligible head of one session, the oldest ready heads of all sessions,
-- leases renewed and released, and the sessions a wakeups poll finds ready.
-- Conventions: README.md beside this file.

-- fragment: release_dead_pins
-- The CTEs `released` and `history`: a head the `claimed` CTE dead-lettered (`exhausted`)
-- gives up its snapshot pins, and the history no other pin keeps goes with them.
released as (
  delete from {schema}.a2_snapshot_pins p
   using claimed k
   where k.exhausted and p.session_id = %(session_id)s and p.consumer = k.consumer
     and p.cursor_key = k.cursor_key and p.event_index = k.head
  returning p.session_id, p.consumer, p.cursor_key, p.event_index, p.reducer, p.up_to_index
), history as (
  -- include: drop_released_history
  returning 1
)

-- fragment: not_paused
-- `c.consumer` is not paused (a2_consumer_pauses): an InitPlan, the paused names read once
-- per statement, so the pick stays a range scan of its index with one more filter.
c.consumer <> all(array(select p.consumer from {schema}.a2_consumer_pauses p))

-- fragment: lease_ttl
-- The column `ttl`: the lease as exact seconds. The parameter may arrive as days, and a
-- timestamptz plus days moves by the session's TimeZone (23 or 25 hours across a DST
-- change): seconds keep the lease independent of the connection's settings.
pg_catalog.make_interval(secs => extract(epoch from %(ttl)s::interval)) as ttl

-- fragment: lease_end
-- The start of a CTE `t` of the time and `lease_end`, the time plus the lease, computed
-- here: Citus refuses a function (timestamptz + interval depends on the TimeZone) of a
-- column in an UPDATE, and any function's call in its CASE or COALESCE.
select x.*, x.now + x.ttl as lease_end
  from (

-- fragment: head_event_columns
-- A claimed or dead head's event beside its cursor row: the `e_` columns codec.head reads.
e.event_id as e_event_id, e.event_type as e_event_type, e.payload as e_payload,
e.created_at as e_created_at, e.cause_consumer as e_cause_consumer,
e.cause_lane as e_cause_lane, e.cause_index as e_cause_index,
e.cause_attempt as e_cause_attempt, e.trace_parent as e_trace_parent

-- fragment: lapsed_attempts
-- The body of the CTE `ended` of a claim: the attempts whose lease lapsed, among the
-- heads of the CTE `taken` (the claim's eligible or picked heads, with their old holder,
-- claim time and attempt), each `lapsed`, or `dead_lettered` when the claim
-- dead-lettered the head (see record_attempts).
select g.session_id, g.consumer, g.cursor_key, g.head as idx, g.old_attempt as attempt,
       g.lane, g.old_holder as holder, g.old_ready as ready_at, g.old_started as started_at,
       t.now as ended_at,
       case when g.exhausted then 'dead_lettered' else 'lapsed' end as outcome,
       null::text as error
  from taken g cross join t
 where g.old_holder is not null

-- fragment: lock_eligible
-- claim_session's picks are locked as they are read, in their order.
for update of c

-- fragment: lock_eligible@citus
-- On Citus a locking read in a CTE that Citus runs apart (its results sent on as
-- intermediate results) fails ("missing data for column"): the update re-checks
-- instead (recheck_eligible@citus), on the row as it is when it locks it.

-- fragment: recheck_eligible
-- (the picks are locked: lock_eligible)

-- fragment: recheck_eligible@citus
and c.head = g.head and c.failed_at is null and c.attempt_count = g.old_attempt
and (c.claim_expires_at is null or c.claim_expires_at <= t.now)

-- name: claim_session
-- Claims every eligible head of one session (the caller holds the session row), paused
-- consumers' heads apart. A lapsed claim counts a failure; reaching max_failures
-- dead-letters the head instead.
with t as materialized (
  -- include: lease_end
  select coalesce(%(now)s::timestamptz, pg_catalog.now()) as now,
         -- include: lease_ttl
  ) x
), s as (
  select clear_index from {schema}.a2_sessions where session_id = %(session_id)s
), eligible as (
  select c.session_id, c.consumer, c.cursor_key,
         c.claim_holder is not null and %(max_failures)s::int is not null
           and c.failure_count + 1 >= %(max_failures)s::int as exhausted,
         -- The attempt a lapsed lease ends, for the history (below).
         c.claim_holder as old_holder, c.last_claimed_at as old_started,
         c.last_ready_at as old_ready,
         c.attempt_count as old_attempt, c.lane, c.head
    from {schema}.a2_cursors c
   where c.session_id = %(session_id)s
     and c.head > (select clear_index from s)
     and c.failed_at is null
     and (%(through)s::bigint is null or c.head <= %(through)s::bigint)
     and (%(names)s::text[] is null or c.consumer = any(%(names)s::text[]))
     and
         -- include: not_paused
     and not exists (
       select 1
         from rows from (pg_catalog.unnest(%(ex_consumers)s::text[]),
                         pg_catalog.unnest(%(ex_keys)s::text[]),
                         pg_catalog.unnest(%(ex_idxs)s::bigint[]))
              as x (consumer, cursor_key, idx)
        where x.consumer = c.consumer and x.cursor_key = c.cursor_key and x.idx = c.head)
     and (c.claim_expires_at is null or c.claim_expires_at <= (select now from t))
   order by c.head, c.consumer collate "C", c.cursor_key collate "C"
     -- include: lock_eligible
), claimed as (
  update {schema}.a2_cursors c
     set attempt_count = c.attempt_count + 1,
         failure_count = c.failure_count + case when c.claim_holder is null then 0 else 1 end,
         first_claimed_at = case when g.exhausted then c.first_claimed_at
                                 else coalesce(c.first_claimed_at, t.now) end,
         last_claimed_at = case when g.exhausted then c.last_claimed_at
                                else t.now end,
         last_ready_at = case when g.exhausted then c.last_ready_at else c.ready_at end,
         claim_holder = case when g.exhausted then null else %(holder)s end,
         claim_expires_at = case when g.exhausted then null
                                 else t.lease_end end,
         failed_at = case when g.exhausted then t.now end,
         ready_at = case when g.exhausted then null
                         else t.lease_end end
    from eligible g cross join t
   where c.session_id = %(session_id)s and c.consumer = g.consumer
     and c.cursor_key = g.cursor_key
     -- include: recheck_eligible
  returning c.*, g.exhausted
), taken as (
  select * from eligible where old_holder is not null
), ended as (
  -- include: lapsed_attempts
), recorded as (
  -- include: record_attempts
),
-- include: release_dead_pins
select k.*, (select clear_index from s) as clear_index,
       -- include: head_event_columns
  from claimed k
  join {schema}.a2_events e on e.session_id = %(session_id)s and e.idx = k.head
 order by k.head, k.consumer collate "C", coalesce(k.lane, '') collate "C",
          k.cursor_key collate "C";

-- name: busy_until
-- Nothing was eligible: the earliest expiry among held or backing-off heads, if any
-- (a paused consumer's heads do not count: nothing claims them before a resume).
select pg_catalog.min(c.claim_expires_at) as retry_at
  from {schema}.a2_cursors c
 where c.session_id = %(session_id)s
   and c.head > (select s.clear_index from {schema}.a2_sessions s
                  where s.session_id = %(session_id)s)
   and c.failed_at is null
   and (%(through)s::bigint is null or c.head <= %(through)s::bigint)
   and (%(names)s::text[] is null or c.consumer = any(%(names)s::text[]))
   and
       -- include: not_paused
   and not exists (
     select 1
       from rows from (pg_catalog.unnest(%(ex_consumers)s::text[]),
                       pg_catalog.unnest(%(ex_keys)s::text[]),
                       pg_catalog.unnest(%(ex_idxs)s::bigint[]))
            as x (consumer, cursor_key, idx)
      where x.consumer = c.consumer and x.cursor_key = c.cursor_key and x.idx = c.head)
   and c.claim_expires_at > coalesce(%(now)s::timestamptz, pg_catalog.now());

-- fragment: claim_any_picks
-- The CTEs `t` (the time, the lease, the paused consumers) and `picked`'s select up to its
-- where clause: the oldest ready heads of every session, paused consumers' apart. The
-- paused names are read once, in `t` (outside `picked`, whose plan is a range scan of
-- a2_cursors_ready alone); the test of "none paused" comes first, so the planner weighs
-- the filter as a coin toss (it took `<> all` of an unknown array for 2% of the rows,
-- and left the index for a bitmap scan and a sort), and the common case, nothing
-- paused, checks no row. The including statement may add conditions, then includes
-- claim_any_claimed.
t as (
  select coalesce(%(now)s::timestamptz, pg_catalog.statement_timestamp()) as now,
         array(select p.consumer from {schema}.a2_consumer_pauses p) as paused,
         -- include: lease_ttl
), picked as (
  select c.session_id, c.consumer, c.cursor_key, c.ready_at as was_ready,
         c.claim_holder is not null and %(max_failures)s::int is not null
           and c.failure_count + 1 >= %(max_failures)s::int as exhausted,
         c.claim_holder as old_holder, c.last_claimed_at as old_started,
         c.last_ready_at as old_ready,
         c.attempt_count as old_attempt, c.lane, c.head
    from {schema}.a2_cursors c
   where c.ready_at <= (select now from t)
     and (%(names)s::text[] is null or c.consumer = any(%(names)s::text[]))
     and ((select pg_catalog.cardinality(paused) = 0 from t)
          or c.consumer <> all((select paused from t)::text[]))

-- fragment: claim_any_claimed
-- The rest of `picked` (its order, literal limit and SKIP LOCKED), the CTE `claimed`
-- that claims (or, at max_failures, dead-letters) each pick, and the CTEs that record the
-- attempts whose lease lapsed in the attempt history (`taken`, `ended`, `recorded`).
   order by c.ready_at, c.session_id collate "C", c.head, c.consumer collate "C",
            coalesce(c.lane, '') collate "C"
   limit {limit}
     for update of c skip locked
), claimed as (
  update {schema}.a2_cursors c
     set attempt_count = c.attempt_count + 1,
         failure_count = c.failure_count + case when c.claim_holder is null then 0 else 1 end,
         first_claimed_at = case when g.exhausted then c.first_claimed_at
                                 else coalesce(c.first_claimed_at, t.now) end,
         last_claimed_at = case when g.exhausted then c.last_claimed_at else t.now end,
         last_ready_at = case when g.exhausted then c.last_ready_at else c.ready_at end,
         claim_holder = case when g.exhausted then null else %(holder)s end,
         claim_expires_at = case when g.exhausted then null
                                 else t.now + t.ttl end,
         failed_at = case when g.exhausted then t.now end,
         ready_at = case when g.exhausted then null else t.now + t.ttl end
    from picked g cross join t
   where c.session_id = g.session_id and c.consumer = g.consumer
     and c.cursor_key = g.cursor_key
     and c.ready_at <= t.now and c.failed_at is null
  returning c.*, g.exhausted, g.was_ready
), taken as (
  select g.*
    from picked g
    join claimed k
      on k.session_id = g.session_id and k.consumer = g.consumer
     and k.cursor_key = g.cursor_key
   where g.old_holder is not null
), ended as (
  -- include: lapsed_attempts
), recorded as (
  -- include: record_attempts
)

-- fragment: claim_any_heads
-- The claimed heads with their session's clear index and their events, oldest first.
select k.*, s.clear_index,
       -- include: head_event_columns
  from claimed k
  join {schema}.a2_sessions s on s.session_id = k.session_id
  join {schema}.a2_events e on e.session_id = k.session_id and e.idx = k.head

-- fragment: claim_any_order
 order by k.was_ready, k.session_id collate "C", k.head, k.consumer collate "C",
          coalesce(k.lane, '') collate "C"

-- name: complete_and_claim
-- A worker's cycle in one autocommit statement, and with nothing completed, claim_any:
-- the completions of event cursors returning no events (`done`), then the oldest ready
-- heads of every session, skipping the heads just completed (a lapsed one may be
-- ready: it must not be updated twice). The pick is an index range scan on ready_at
-- (a2_cursors_ready) with an incremental sort for the tie-breakers; the LIMIT is a
-- literal ({limit}), so even the generic plan walks the index
-- (tests/postgres/test_plans.py), and the JSON documents keep the custom plans no
-- cheaper than the generic one, so the prepared statement is planned once (the claim
-- alone, with its parameters, was planned again on every call). SKIP LOCKED:
-- concurrent claimers never wait on each other nor get the same head. Each completion
-- is fenced on its exact attempt on the row as it is when updated (a clear parks a
-- claimed head: ready_at null); an event cursor takes no new head, so no lock of the
-- session row is needed to keep indexes or lanes in order, and nothing is notified.
-- The one-time filter `missed` runs the completions first; if any missed its fence
-- the statement fails with the marker below, writing nothing, and the caller takes
-- complete_and_claim's transaction (completions.complete_and_claim).
with done as (
  select *
    from pg_catalog.json_to_recordset(%(done)s::json)
         as u (session_id text, consumer text, cursor_key text, head bigint, attempt int)
), hit as (
  -- Each completed head's row, found by its key and fenced as read: a lateral subquery
  -- kept apart by its limit is an index probe per completion, whatever the planner
  -- guesses of the document's size (it would hash-join a scan of every cursor).
  select x.ctid, d.session_id, d.consumer, d.cursor_key, d.head, d.attempt, x.claim_holder,
         x.last_ready_at, x.last_claimed_at
    from done d
   cross join lateral (
     select c.ctid, c.claim_holder, c.last_ready_at, c.last_claimed_at
       from {schema}.a2_cursors c
      where c.session_id = d.session_id and c.consumer = d.consumer
        and c.cursor_key = d.cursor_key and c.kind = 'event' and c.head = d.head
        and c.attempt_count = d.attempt and c.claim_holder is not null
        and c.failed_at is null and c.ready_at is not null
      limit 1) x
), advanced as (
  -- By row version: one changed since it was read (its ctid moved on) is not
  -- updated, and the completion counts as missed; the fence is checked again on the row.
  update {schema}.a2_cursors c
     set position = c.head, head = null, ready_at = null, claim_expires_at = null,
         completed_idx = c.head, completed_attempt = c.attempt_count,
         returned_event_ids = array[]::text[],
         -- include: no_attempts
   where c.ctid = any(array(select ctid from hit)) and c.kind = 'event'
     and c.claim_holder is not null and c.failed_at is null and c.ready_at is not null
  returning c.session_id, c.consumer, c.cursor_key
), completed as (
  -- The history rows of the completions (an event cursor has no lane).
  select h.session_id, h.consumer, h.cursor_key, h.head as idx, h.attempt, null::text as lane,
         h.claim_holder as holder, h.last_ready_at as ready_at, h.last_claimed_at as started_at,
         coalesce(%(now)s::timestamptz, pg_catalog.statement_timestamp()) as ended_at,
         'completed' as outcome, null::text as error
    from hit h
    join advanced a
      on a.session_id = h.session_id and a.consumer = h.consumer
     and a.cursor_key = h.cursor_key
), completions_recorded as (
  insert into {schema}.a2_attempts (session_id, consumer, cursor_key, idx, attempt, lane,
                                    holder, ready_at, started_at, ended_at, outcome, error)
  select * from completed
  on conflict do nothing
), refresh as (
  update {schema}.a2_cursors c
     set types = x.types
    from (select u.session_id, u.consumer, u.cursor_key,
                 case when u.types is not null
                      then array(select pg_catalog.json_array_elements_text(u.types)) end
                 as types
            from pg_catalog.json_to_recordset(%(refresh)s::json)
                 as u (session_id text, consumer text, cursor_key text, types json)) x
   cross join lateral (
     select r.ctid from {schema}.a2_cursors r
      where r.session_id = x.session_id and r.consumer = x.consumer
        and r.cursor_key = x.cursor_key and r.kind = 'log'
        and r.types is distinct from x.types
      limit 1) y
   where c.ctid = y.ctid and c.types is distinct from x.types
), missed as (
  select (case when (select pg_catalog.count(*) from advanced) <> %(count)s::int
               then 'a2pg: a completion missed its fence' end)::int as missed
),
-- include: claim_any_picks
     and not exists (select from done d
                      where d.session_id = c.session_id and d.consumer = c.consumer
                        and d.cursor_key = c.cursor_key)
-- include: claim_any_claimed
, released as (
  -- The pins of the heads completed here and of those claimed into the dead letters.
  delete from {schema}.a2_snapshot_pins p
   using (select session_id, consumer, cursor_key, head from done
          union all
          select session_id, consumer, cursor_key, head from claimed where exhausted) k
   cross join lateral (
     select q.ctid from {schema}.a2_snapshot_pins q
      where q.session_id = k.session_id and q.consumer = k.consumer
        and q.cursor_key = k.cursor_key and q.event_index = k.head
     offset 0) y
   where p.ctid = y.ctid
  returning p.session_id, p.consumer, p.cursor_key, p.event_index, p.reducer, p.up_to_index
), history as (
  -- include: drop_released_history
  returning 1
)
-- include: claim_any_heads
 where (select missed from missed) is null
-- include: claim_any_order
;

-- name: renew_claims
-- Extends the live claims of `holder` at exactly these attempts. Heads at or below the
-- clear index stay parked (ready_at null): a renewal must not hand them to claim_any.
with t as materialized (
  -- include: lease_end
  select coalesce(%(now)s::timestamptz, pg_catalog.now()) as now,
         -- include: lease_ttl
  ) x
)
update {schema}.a2_cursors c
   set claim_expires_at = t.lease_end,
       ready_at = t.lease_end
  from t,
       rows from (pg_catalog.unnest(%(consumers)s::text[]),
                  pg_catalog.unnest(%(keys)s::text[]),
                  pg_catalog.unnest(%(idxs)s::bigint[]),
                  pg_catalog.unnest(%(attempts)s::int[]))
       as k (consumer, cursor_key, idx, attempt)
 where c.session_id = %(session_id)s and c.consumer = k.consumer
   and c.cursor_key = k.cursor_key and c.head = k.idx and c.attempt_count = k.attempt
   and c.failed_at is null and c.claim_holder = %(holder)s
   and c.claim_expires_at > t.now
   and c.head > (select s.clear_index from {schema}.a2_sessions s
                  where s.session_id = %(session_id)s)
returning c.consumer, c.cursor_key, c.head;

-- name: release_claims
-- Hands back the claims of `holder` at exactly these attempts, lapsed or not: claimable
-- at once (ready_at is now) with no failure counted; attempt_count stays, so the next
-- claim fences the released attempt out. Heads at or below the clear index stay parked.
-- Notifies the session once when anything was released (an InitPlan: evaluated at most
-- once, and only when a released row is returned).
with t as materialized (
  select coalesce(%(now)s::timestamptz, pg_catalog.now()) as now
), released as (
  update {schema}.a2_cursors c
     set claim_holder = null, claim_expires_at = null, ready_at = t.now
    from t,
         rows from (pg_catalog.unnest(%(consumers)s::text[]),
                    pg_catalog.unnest(%(keys)s::text[]),
                    pg_catalog.unnest(%(idxs)s::bigint[]),
                    pg_catalog.unnest(%(attempts)s::int[]))
         as k (consumer, cursor_key, idx, attempt)
   where c.session_id = %(session_id)s and c.consumer = k.consumer
     and c.cursor_key = k.cursor_key and c.head = k.idx and c.attempt_count = k.attempt
     and c.failed_at is null and c.claim_holder = %(holder)s
     and c.head > (select s.clear_index from {schema}.a2_sessions s
                    where s.session_id = %(session_id)s)
  returning c.consumer, c.cursor_key, c.head, c.lane, c.attempt_count, c.last_ready_at,
            c.last_claimed_at, c.ready_at
), ended as (
  select %(session_id)s::text as session_id, r.consumer, r.cursor_key, r.head as idx,
         r.attempt_count as attempt, r.lane, %(holder)s::text as holder,
         r.last_ready_at as ready_at, r.last_claimed_at as started_at,
         r.ready_at as ended_at, 'released' as outcome,
         null::text as error
    from released r
), recorded as (
  -- include: record_attempts
), notified as (
  -- include: release_notified
)
select r.consumer, r.cursor_key, r.head,
       -- include: release_notify_payloads
       (select pg_catalog.count(*) from notified) as notified
  from released r;

-- fragment: release_notified
select pg_catalog.pg_notify(%(channel)s,
                 pg_catalog.json_build_object('session_id', s.session_id, 'head', s.head)::text)
  from {schema}.a2_sessions s
 where s.session_id = %(session_id)s and exists (select 1 from released)

-- fragment: release_notified@citus
-- The payload comes back (`notify_payloads`, see notify_ready@citus).
select pg_catalog.json_build_object('session_id', s.session_id, 'head', s.head)::text as payload
  from {schema}.a2_sessions s
 where s.session_id = %(session_id)s and exists (select 1 from released)

-- fragment: release_notify_payloads
-- (nothing on plain PostgreSQL: the statement notified)

-- fragment: release_notify_payloads@citus
array(select payload from notified) as notify_payloads,

-- name: ready_sessions
-- The sessions whose oldest heads are claimable now: what a wakeups poll announces. A
-- paused consumer's heads are not (no claim would take them, and a backlog of them
-- would hide every other session's from the poll).
select distinct r.session_id
  from (select c.session_id
          from {schema}.a2_cursors c
         where c.ready_at <= coalesce(%(now)s::timestamptz, pg_catalog.statement_timestamp())
           and
               -- include: not_paused
         order by c.ready_at
         limit %(limit)s::bigint) r;

-- name: next_due
-- next_due_in: seconds until the soonest readiness still to come of the served consumers'
-- heads (a delay's, a backoff's or a lease's end), paused consumers' apart: a walk of
-- a2_cursors_ready from now on that stops at the first served head.
select extract(epoch from (
         select c.ready_at
           from {schema}.a2_cursors c
          where c.ready_at > coalesce(%(now)s::timestamptz, pg_catalog.statement_timestamp())
            and (%(names)s::text[] is null or c.consumer = any(%(names)s::text[]))
            and
                -- include: not_paused
          order by c.ready_at
          limit 1)
       - coalesce(%(now)s::timestamptz, pg_catalog.statement_timestamp()))::float8 as due_in;
