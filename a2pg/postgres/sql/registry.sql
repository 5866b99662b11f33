-- The consumer registry: consumers declared, removed and listed.
-- Conventions: README.md beside this file.

-- name: register_consumers
insert into {schema}.a2_consumers as r (name, lane, types, backfill, registered_at, updated_at)
select k.name, k.lane,
       case when k.types_json is null then null
            else array(select pg_catalog.json_array_elements_text(k.types_json::json)) end,
       k.backfill, n.now, n.now
  from rows from (pg_catalog.unnest(%(names)s::text[]),
                  pg_catalog.unnest(%(lanes)s::text[]),
                  pg_catalog.unnest(%(types)s::text[]),
                  pg_catalog.unnest(%(backfills)s::boolean[]))
       as k (name, lane, types_json, backfill)
 cross join (select coalesce(%(now)s::timestamptz, pg_catalog.statement_timestamp()) as now) n
on conflict (name) do update
  set lane = excluded.lane, types = excluded.types, backfill = excluded.backfill,
      updated_at = excluded.updated_at
where (r.lane, r.types, r.backfill)
      is distinct from (excluded.lane, excluded.types, excluded.backfill);

-- name: unregister_consumers
delete from {schema}.a2_consumers where name = any(%(names)s::text[]);

-- name: registered_consumers
select name, lane, types, backfill from {schema}.a2_consumers order by name collate "C";
