-- The attempt history: the finished attempts the statements that end them record, one
-- head's attempts, retention. Conventions: README.md beside this file.

-- fragment: record_attempts
-- The body of a CTE that records the attempts of the CTE `ended` (its columns session_id,
-- consumer, cursor_key, idx, attempt, lane, holder, ready_at, started_at, ended_at,
-- outcome, error)
-- in a2_attempts, in the statement that ends them; one recorded already (a repeated call)
-- stays as it was.
insert into {schema}.a2_attempts (session_id, consumer, cursor_key, idx, attempt, lane, holder,
                                  ready_at, started_at, ended_at, outcome, error)
select session_id, consumer, cursor_key, idx, attempt, lane, holder, ready_at, started_at,
       ended_at, outcome, error
  from ended
on conflict do nothing
returning 1

-- fragment: record_attempts@citus
-- As record_attempts, of one session (`session_id`): Citus runs a statement on the
-- session's shard only when what it inserts names the session itself.
insert into {schema}.a2_attempts (session_id, consumer, cursor_key, idx, attempt, lane, holder,
                                  ready_at, started_at, ended_at, outcome, error)
select %(session_id)s::text, consumer, cursor_key, idx, attempt, lane, holder, ready_at,
       started_at, ended_at, outcome, error
  from ended
on conflict do nothing
returning 1

-- name: record_attempt
-- One finished attempt (cancel_head of a claimed head).
with ended as (
  select %(session_id)s::text as session_id, %(consumer)s::text as consumer,
         %(cursor_key)s::text as cursor_key, %(idx)s::bigint as idx, %(attempt)s::int as attempt,
         %(lane)s::text as lane, %(holder)s::text as holder,
         %(ready_at)s::timestamptz as ready_at, %(started_at)s::timestamptz as started_at, %(ended_at)s::timestamptz as ended_at,
         %(outcome)s::text as outcome, %(error)s::text as error
), recorded as (
  -- include: record_attempts
)
select pg_catalog.count(*) as recorded from recorded;

-- name: head_attempts
-- The recorded attempts of one consumer's head at idx (every cursor of it, or the one
-- cursor_key names), by attempt: a primary-key range scan.
select a.*
  from {schema}.a2_attempts a
 where a.session_id = %(session_id)s and a.consumer = %(consumer)s and a.idx = %(idx)s::bigint
   and (%(cursor_key)s::text is null or a.cursor_key = %(cursor_key)s::text)
 order by a.attempt, a.cursor_key collate "C";

-- name: prune_attempts
-- Up to `limit` attempts that ended before `before`, oldest first (the ended_at index).
with gone as (
  select a.ctid
    from {schema}.a2_attempts a
   where a.ended_at < %(before)s::timestamptz
   order by a.ended_at
   limit %(limit)s::bigint
)
delete from {schema}.a2_attempts a
 using gone
 where a.ctid = gone.ctid
returning 1;

-- name: prune_attempts@citus
-- As prune_attempts, the attempts found by key: a row's ctid means nothing across shards.
delete from {schema}.a2_attempts a
 where (a.session_id, a.consumer, a.cursor_key, a.idx, a.attempt) in (
   select g.session_id, g.consumer, g.cursor_key, g.idx, g.attempt
     from {schema}.a2_attempts g
    where g.ended_at < %(before)s::timestamptz
    order by g.ended_at
    limit %(limit)s::bigint)
returning 1;

-- name: activity
-- Finished attempts per consumer and time bucket (`bucket_us` microseconds, aligned on the
-- epoch, floored on exact integers as every backend does) since `since`, by outcome, with
-- their mean and longest duration and wait (claim time less ready time, never below 0):
-- a range scan of the ended_at index, what the dashboard's charts draw.
select a.consumer,
       timestamptz 'epoch'
         + (pg_catalog.floor((extract(epoch from a.ended_at) * 1000000)
                             / %(bucket_us)s::int8) * %(bucket_us)s::int8)::int8
           * interval '1 microsecond' as at,
       pg_catalog.count(*) filter (where a.outcome = 'completed') as completed,
       pg_catalog.count(*) filter (where a.outcome = 'failed') as failed,
       pg_catalog.count(*) filter (where a.outcome = 'dead_lettered') as dead_lettered,
       pg_catalog.count(*) filter (where a.outcome not in ('completed', 'failed', 'dead_lettered'))
         as other,
       pg_catalog.avg(extract(epoch from a.ended_at - a.started_at))::float8 as mean_duration,
       pg_catalog.max(extract(epoch from a.ended_at - a.started_at))::float8 as max_duration,
       -- greatest() skips nulls: the filter keeps attempts with no ready time out.
       pg_catalog.avg(greatest(0, extract(epoch from a.started_at - a.ready_at)))
         filter (where a.started_at - a.ready_at is not null)::float8 as mean_wait,
       pg_catalog.max(greatest(0, extract(epoch from a.started_at - a.ready_at)))
         filter (where a.started_at - a.ready_at is not null)::float8 as max_wait
  from {schema}.a2_attempts a
 where a.ended_at >= %(since)s::timestamptz
 group by 1, 2
 order by a.consumer collate "C", 2;
