-- The consumer registry: log consumers declared, removed and listed.
-- Conventions: README.md beside this file.

-- name: register_consumer
insert into a2_consumers as r (name, lane, types, backfill, registered_at, updated_at)
values (:name, :lane, :types, :backfill, :now, :now)
on conflict (name) do update
  set lane = excluded.lane, types = excluded.types, backfill = excluded.backfill,
      updated_at = excluded.updated_at
where r.lane is not excluded.lane or r.types is not excluded.types
   or r.backfill is not excluded.backfill;

-- name: unregister_consumer
delete from a2_consumers where name = :name;

-- name: registered_consumers
select name, lane, types, backfill from a2_consumers order by name;
