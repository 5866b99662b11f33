-- Presence: fields written by participants, last writer wins, read with expired rows
-- swept. Conventions: README.md beside this file.

-- name: presence_write
-- Last writer wins per field by `at`, unless the stored value has expired. `now` is the
-- injected clock's time or the text 'now' (Database.moment: the transaction's start,
-- read when the parameter is bound), a constant where Citus allows no function call
-- (the ON CONFLICT's WHERE of a reference table).
insert into {schema}.a2_presence as p (ns, participant, field, value, seen, at, expires_at)
select %(ns)s::text, %(participant)s::text, k.field, k.value::json, %(seen)s::json,
       %(at)s::timestamptz, n.now + n.ttl
  from rows from (pg_catalog.unnest(%(fields)s::text[]),
                  pg_catalog.unnest(%(values)s::text[])) as k (field, value)
 cross join (select %(now)s::timestamptz as now,
                    -- include: lease_ttl
            ) n
on conflict (ns, participant, field) do update
  set value = excluded.value, seen = excluded.seen, at = excluded.at,
      expires_at = excluded.expires_at
where p.at <= excluded.at or p.expires_at <= %(now)s::timestamptz
returning field;

-- name: presence_write@citus
-- As presence_write, its rows made first (a2_presence is a reference table: Citus runs
-- the insert's select on a node that cannot tell the parameters' types).
with k as materialized (
  select %(ns)s::text as ns, %(participant)s::text as participant, u.field,
         u.value::json as value, %(seen)s::json as seen, %(at)s::timestamptz as at,
         %(now)s::timestamptz
           + pg_catalog.make_interval(secs => extract(epoch from %(ttl)s::interval))
           as expires_at
    from rows from (pg_catalog.unnest(%(fields)s::text[]),
                    pg_catalog.unnest(%(values)s::text[])) as u (field, value)
), written as (
  insert into {schema}.a2_presence as p (ns, participant, field, value, seen, at, expires_at)
  select ns, participant, field, value, seen, at, expires_at from k
  on conflict (ns, participant, field) do update
    set value = excluded.value, seen = excluded.seen, at = excluded.at,
        expires_at = excluded.expires_at
  where p.at <= excluded.at or p.expires_at <= %(now)s::timestamptz
  returning field
)
select field from written;

-- name: presence_read
-- Sweeps expired rows and returns the live, non-null fields.
with n as (
  select coalesce(%(now)s::timestamptz, pg_catalog.statement_timestamp()) as now
), swept as (
  delete from {schema}.a2_presence p
   using n
   where p.ns = %(ns)s and p.expires_at <= n.now
  returning 1
)
select p.participant, p.field, p.value, p.seen, p.at, p.expires_at
  from {schema}.a2_presence p
 cross join n
 where p.ns = %(ns)s and p.expires_at > n.now and pg_catalog.json_typeof(p.value) <> 'null'
 order by p.participant collate "C", p.field collate "C";
