-- Worker heartbeats: one row per live worker, its last beat. Every time in a row is the
-- database's (or the store's injected clock's), never the worker's own.
-- Conventions: README.md beside this file.

-- name: heartbeat
-- Inserts or replaces the holder's row; started_at stays while the beats come from the
-- same host and pid (a holder name reused by a new process starts again).
insert into {schema}.a2_workers as w (holder, host, pid, consumers, concurrency, started_at,
                                      last_seen, in_flight, version, interval_seconds,
                                      completed, failed)
select %(holder)s, %(host)s, %(pid)s::int, %(consumers)s::text[], %(concurrency)s::int,
       t.now, t.now, %(in_flight)s::int, %(version)s, %(interval)s::float8,
       %(completed)s::bigint, %(failed)s::bigint
  from (select coalesce(%(now)s::timestamptz, pg_catalog.clock_timestamp()) as now) t
on conflict (holder) do update set
  host = excluded.host,
  pid = excluded.pid,
  consumers = excluded.consumers,
  concurrency = excluded.concurrency,
  started_at = case when (w.host, w.pid) = (excluded.host, excluded.pid) then w.started_at
                    else excluded.started_at end,
  last_seen = excluded.last_seen,
  in_flight = excluded.in_flight,
  version = excluded.version,
  interval_seconds = excluded.interval_seconds,
  completed = excluded.completed,
  failed = excluded.failed;

-- name: forget_workers
delete from {schema}.a2_workers where holder = any(%(holders)s::text[]);

-- name: list_workers
-- Every row by holder, with how long ago it was last seen (never negative).
select w.*, greatest(extract(epoch from t.now - w.last_seen)::float8, 0) as seen_ago
  from {schema}.a2_workers w
 cross join (select coalesce(%(now)s::timestamptz, pg_catalog.clock_timestamp()) as now) t
 order by w.holder collate "C";
