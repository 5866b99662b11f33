-- Clear and reclaim: the clear marker and what it restarts or drops, then the batched
-- deletion of everything below it. Conventions: README.md beside this file.

-- name: mark_cleared
insert into a2_clears (session_id, clear_index) values (:session_id, :marker)
on conflict (session_id) do update set clear_index = excluded.clear_index;

-- name: restart_log_cursors
update a2_cursors
   set position = :marker, head = null, ready_at = null, claim_expires_at = null,
       completed_idx = null, completed_attempt = null, returned_event_ids = null,
       -- include: no_attempts
 where session_id = :session_id and kind = 'log';

-- name: drop_lane_cursors
-- Lane cursors (one per consumer and lane) go at once: the lane's next event starts a
-- new one, and a log consumer may follow a lane of that name.
delete from a2_cursors where session_id = :session_id and kind = 'lane';

-- name: park_cursors
-- Event heads below the marker are dropped from claims (their rows, possibly many, stay
-- until reclaim deletes them in batches).
update a2_cursors set ready_at = null
 where session_id = :session_id and kind = 'event' and ready_at is not null;

-- name: drop_pins
delete from a2_snapshot_pins where session_id = :session_id;

-- name: drop_history
delete from a2_snapshot_history where session_id = :session_id;

-- name: reclaim_events
-- Up to `:batch` of the oldest events below the clear marker.
delete from a2_events
 where session_id = :session_id
   and idx in (select idx from a2_events
                where session_id = :session_id and idx < :clear_index
                order by idx limit :batch)
returning idx;

-- name: reclaim_lane_events
delete from a2_lane_events where session_id = :session_id and idx <= :through;

-- name: reclaim_event_cursors
delete from a2_cursors
 where session_id = :session_id and kind = 'event' and position < :through;

-- name: events_below
select exists (select 1 from a2_events
                where session_id = :session_id and idx < :clear_index) as left_below;

-- name: reclaim_cursors
-- Nothing is left below the marker: the cursors there go too.
delete from a2_cursors
 where session_id = :session_id and kind <> 'log'
   and (head is null or head <= :clear_index) and position <= :clear_index;

-- name: reclaim_pins
delete from a2_snapshot_pins where session_id = :session_id and up_to_index < :clear_index;

-- name: reclaim_history
delete from a2_snapshot_history
 where session_id = :session_id and up_to_index < :clear_index;

-- name: reclaim_snapshots
delete from a2_snapshots where session_id = :session_id and up_to_index < :clear_index;
