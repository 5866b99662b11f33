-- Snapshots: the newest usable fold, the head snapshot and its history, and the pins
-- that keep history for heads in flight. Conventions: README.md beside this file.

-- name: newest_snapshot
-- The newest fold of `:reducer` between the clear index and `:upto`, head or history.
select x.up_to_index, x.state
  from (select up_to_index, state from a2_snapshots
         where session_id = :session_id and reducer_name = :reducer
        union all
        select up_to_index, state from a2_snapshot_history
         where session_id = :session_id and reducer_name = :reducer) x
 where x.up_to_index >= :clear_index and x.up_to_index <= :upto
 order by x.up_to_index desc
 limit 1;

-- name: snapshot_head
select up_to_index, state, updated_at from a2_snapshots
 where session_id = :session_id and reducer_name = :reducer;

-- name: is_pinned
select exists (select 1 from a2_snapshot_pins
                where session_id = :session_id and reducer_name = :reducer
                  and up_to_index = :up_to) as pinned;

-- name: insert_pin
insert into a2_snapshot_pins (session_id, consumer, cursor_key, event_index, reducer_name,
                              up_to_index)
values (:session_id, :consumer, :cursor_key, :idx, :reducer, :up_to)
on conflict do nothing;

-- name: put_history
insert into a2_snapshot_history (session_id, reducer_name, up_to_index, state, updated_at)
values (:session_id, :reducer, :up_to, :state, :updated_at)
on conflict (session_id, reducer_name, up_to_index) do update
  set state = excluded.state, updated_at = excluded.updated_at;

-- name: put_snapshot_head
insert into a2_snapshots (session_id, reducer_name, up_to_index, state, updated_at)
values (:session_id, :reducer, :up_to, :state, :now)
on conflict (session_id, reducer_name) do update
  set up_to_index = excluded.up_to_index, state = excluded.state,
      updated_at = excluded.updated_at;

-- name: release_pins
-- A finished, skipped or dead head's pins; returns the checkpoints they held.
delete from a2_snapshot_pins
 where session_id = :session_id and consumer = :consumer and cursor_key = :cursor_key
   and event_index = :idx
returning reducer_name, up_to_index;

-- name: drop_unpinned_history
-- A checkpoint whose last pin went is history no one keeps.
delete from a2_snapshot_history
 where session_id = :session_id and reducer_name = :reducer and up_to_index = :up_to
   and not exists (select 1 from a2_snapshot_pins p
                    where p.session_id = :session_id and p.reducer_name = :reducer
                      and p.up_to_index = :up_to);
