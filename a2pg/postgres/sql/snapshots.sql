-- Snapshots: the state read (newest snapshot, then the events after it), the stored
-- head snapshot and its history, and the pins that keep history for heads in flight.
-- Conventions: README.md beside this file.

-- fragment: drop_released_history
-- Deletes the history checkpoints of the pins in the CTE `released` (pins this statement
-- deletes) that no other pin keeps; the including statement defines `released`.
delete from {schema}.a2_snapshot_history h
 using (select distinct session_id, reducer, up_to_index from released) r
 cross join lateral (
   -- A probe of the primary key per checkpoint, kept apart by its limit: the planner
   -- guesses many released pins and would otherwise scan all of history.
   select x.ctid from {schema}.a2_snapshot_history x
    where x.session_id = r.session_id and x.reducer = r.reducer
      and x.up_to_index = r.up_to_index
    limit 1) y
 where h.ctid = y.ctid
   and not exists (
     select 1
       from {schema}.a2_snapshot_pins p
      where p.session_id = h.session_id and p.reducer = h.reducer
        and p.up_to_index = h.up_to_index
        and not exists (
          select 1 from released x
           where x.session_id = p.session_id and x.consumer = p.consumer
             and x.cursor_key = p.cursor_key and x.event_index = p.event_index
             and x.reducer = p.reducer and x.up_to_index = p.up_to_index))

-- fragment: drop_released_history@citus
-- As drop_released_history, each table filtered by the one session (`session_id`) and
-- joined without a lateral subquery: Citus runs a statement on a shard only when every
-- table it writes or reads names its session.
delete from {schema}.a2_snapshot_history h
 using (select distinct reducer, up_to_index from released) r
 where h.session_id = %(session_id)s and h.reducer = r.reducer
   and h.up_to_index = r.up_to_index
   and not exists (
     select 1
       from {schema}.a2_snapshot_pins p
      where p.session_id = %(session_id)s and p.reducer = h.reducer
        and p.up_to_index = h.up_to_index
        and not exists (
          select 1 from released x
           where x.consumer = p.consumer and x.cursor_key = p.cursor_key
             and x.event_index = p.event_index and x.reducer = p.reducer
             and x.up_to_index = p.up_to_index))

-- name: read_state
-- The newest snapshot between the clear index and `through` (capped at the head), then
-- the events after it; the snapshot's state rides on the first row only.
with b as (
  select s.head, s.clear_index,
         least(coalesce(%(through)s::bigint, s.head), s.head) as upto
    from {schema}.a2_sessions s
   where s.session_id = %(session_id)s
), snap as (
  select x.up_to_index, x.state
    from (select up_to_index, state from {schema}.a2_snapshots
           where session_id = %(session_id)s and reducer = %(reducer)s
          union all
          select up_to_index, state from {schema}.a2_snapshot_history
           where session_id = %(session_id)s and reducer = %(reducer)s) x
    cross join b
   where x.up_to_index >= b.clear_index and x.up_to_index <= b.upto
   order by x.up_to_index desc
   limit 1
)
select b.head, b.clear_index, snap.up_to_index as snapshot_index,
       case when pg_catalog.row_number() over (order by e.idx) = 1 then snap.state end as state,
       -- include: event_columns
  from b
  left join snap on true
  left join {schema}.a2_events e
    on e.session_id = %(session_id)s
   and e.idx > greatest(coalesce(snap.up_to_index, 0), b.clear_index - 1)
   and e.idx <= b.upto
 order by e.idx;

-- name: snapshot_head
select up_to_index from {schema}.a2_snapshots
 where session_id = %(session_id)s and reducer = %(reducer)s;

-- name: pinned_checkpoints
select distinct up_to_index from {schema}.a2_snapshot_pins
 where session_id = %(session_id)s and reducer = %(reducer)s;

-- name: insert_pins
insert into {schema}.a2_snapshot_pins (session_id, consumer, cursor_key, event_index, reducer,
                              up_to_index)
select %(session_id)s, k.consumer, k.cursor_key, k.event_index, %(reducer)s, k.up_to_index
  from rows from (pg_catalog.unnest(%(consumers)s::text[]),
                  pg_catalog.unnest(%(keys)s::text[]),
                  pg_catalog.unnest(%(idxs)s::bigint[]),
                  pg_catalog.unnest(%(up_to)s::bigint[]))
       as k (consumer, cursor_key, event_index, up_to_index)
on conflict do nothing;

-- name: archive_snapshot_head
-- The stored head snapshot moves to history (a newer one replaces it and a pin keeps it).
insert into {schema}.a2_snapshot_history as h (session_id, reducer, up_to_index, state, updated_at)
select session_id, reducer, up_to_index, state, updated_at
  from {schema}.a2_snapshots
 where session_id = %(session_id)s and reducer = %(reducer)s
   and up_to_index = %(up_to)s::bigint
on conflict (session_id, reducer, up_to_index) do update
  set state = excluded.state, updated_at = excluded.updated_at;

-- name: put_history
insert into {schema}.a2_snapshot_history as h (session_id, reducer, up_to_index, state, updated_at)
select %(session_id)s, %(reducer)s, k.up_to_index, k.state::json, %(now)s::timestamptz
  from rows from (pg_catalog.unnest(%(up_to)s::bigint[]),
                  pg_catalog.unnest(%(states)s::text[])) as k (up_to_index, state)
on conflict (session_id, reducer, up_to_index) do update
  set state = excluded.state, updated_at = excluded.updated_at;

-- name: put_snapshot_head
insert into {schema}.a2_snapshots as h (session_id, reducer, up_to_index, state, updated_at)
values (%(session_id)s, %(reducer)s, %(up_to)s::bigint, %(state)s::json, %(now)s::timestamptz)
on conflict (session_id, reducer) do update
  set up_to_index = excluded.up_to_index, state = excluded.state,
      updated_at = excluded.updated_at;

-- name: release_pins
-- A finished, skipped or dead head's snapshot pins, and the history no other pin keeps.
with k as (
  select *
    from rows from (pg_catalog.unnest(%(session_ids)s::text[]),
                    pg_catalog.unnest(%(consumers)s::text[]),
                    pg_catalog.unnest(%(keys)s::text[]),
                    pg_catalog.unnest(%(idxs)s::bigint[]))
         as u (session_id, consumer, cursor_key, event_index)
), released as (
  delete from {schema}.a2_snapshot_pins p
   using k
   where p.consumer = k.consumer
     and p.session_id =
         -- include: session_of_k
     and p.cursor_key = k.cursor_key and p.event_index = k.event_index
  returning p.session_id, p.consumer, p.cursor_key, p.event_index, p.reducer, p.up_to_index
)
-- include: drop_released_history
;

