-- Clear and reclaim: the clear marker and what it restarts or parks, then the
-- batched deletion of everything below it. Conventions: README.md beside this file.

-- name: mark_cleared
update {schema}.a2_sessions set head = %(marker)s::bigint, clear_index = %(marker)s::bigint
 where session_id = %(session_id)s;

-- name: restart_log_cursors
update {schema}.a2_cursors
   set position = %(marker)s::bigint, head = null, ready_at = null, claim_expires_at = null,
       completed_idx = null, completed_attempt = null, returned_event_ids = null,
       -- include: no_attempts
 where session_id = %(session_id)s and kind = 'log';

-- name: drop_lane_cursors
-- Lane cursors (one per consumer and lane) go at once, as the contract drops them: the
-- lane's next event starts a new one, and a log consumer may follow a lane of that name.
delete from {schema}.a2_cursors
 where session_id = %(session_id)s and kind = 'lane';

-- name: park_cursors
-- Event heads below the marker are dropped from claims (their rows, possibly many,
-- stay until reclaim deletes them in batches).
update {schema}.a2_cursors set ready_at = null
 where session_id = %(session_id)s and kind <> 'log' and ready_at is not null;

-- name: drop_pins
with pins as (
  delete from {schema}.a2_snapshot_pins where session_id = %(session_id)s returning 1
)
delete from {schema}.a2_snapshot_history where session_id = %(session_id)s;

-- name: reclaim_batch
-- Up to `batch` of the oldest events below the clear marker, with their lane records
-- and finished event cursors.
with doomed as (
  select idx from {schema}.a2_events
   where session_id = %(session_id)s and idx < %(clear_index)s::bigint
   order by idx
   limit %(batch)s::bigint
), gone as (
  delete from {schema}.a2_events e
   using doomed d
   where e.session_id = %(session_id)s and e.idx = d.idx
  returning e.idx
), bound as (
  select pg_catalog.count(*) as deleted, pg_catalog.max(idx) as through from gone
), lanes as (
  delete from {schema}.a2_lane_events l
   using bound b
   where l.session_id = %(session_id)s and l.idx <= b.through
  returning 1
), cursors as (
  delete from {schema}.a2_cursors c
   using bound b
   where c.session_id = %(session_id)s and c.kind = 'event' and c.position < b.through
  returning 1
)
select b.deleted,
       not exists (select 1 from {schema}.a2_events e
                    where e.session_id = %(session_id)s and e.idx < %(clear_index)s::bigint
                      and e.idx > coalesce(b.through, 0)) as done
  from bound b;

-- name: reclaim_finish
-- Nothing is left below the marker: dead cursors, snapshots, history and pins go too.
with cursors as (
  delete from {schema}.a2_cursors
   where session_id = %(session_id)s and kind <> 'log'
     and (head is null or head <= %(clear_index)s::bigint)
     and position <= %(clear_index)s::bigint
  returning 1
), pins as (
  delete from {schema}.a2_snapshot_pins
   where session_id = %(session_id)s and up_to_index < %(clear_index)s::bigint
  returning 1
), history as (
  delete from {schema}.a2_snapshot_history
   where session_id = %(session_id)s and up_to_index < %(clear_index)s::bigint
  returning 1
)
delete from {schema}.a2_snapshots
 where session_id = %(session_id)s and up_to_index < %(clear_index)s::bigint;
