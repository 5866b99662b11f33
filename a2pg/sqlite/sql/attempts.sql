-- The attempt history: finished attempts as they end, one head's attempts, retention.
-- Conventions: README.md beside this file.

-- name: record_attempt
-- One finished attempt, its holder and claim time as the cursor had them; one recorded
-- already (a repeated call) stays as it was.
insert into a2_attempts (session_id, consumer, cursor_key, idx, attempt, lane, holder,
                         ready_at, started_at, ended_at, outcome, error)
values (:session_id, :consumer, :cursor_key, :idx, :attempt, :lane, :holder, :ready_at,
        :started_at, :ended_at, :outcome, :error)
on conflict do nothing;

-- name: head_attempts
-- The recorded attempts of one consumer's head at idx (every cursor of it, or the one
-- :cursor_key names), by attempt.
select a.*
  from a2_attempts a
 where a.session_id = :session_id and a.consumer = :consumer and a.idx = :idx
   and (:cursor_key is null or a.cursor_key = :cursor_key)
 order by a.attempt, a.cursor_key;

-- name: prune_attempts
-- Up to :limit attempts that ended before :before, oldest first (the ended_at index).
delete from a2_attempts
 where rowid in (select rowid from a2_attempts
                  where ended_at < :before
                  order by ended_at
                  limit :limit);

-- name: activity
-- Finished attempts per consumer and time bucket (:bucket_us microseconds, aligned on the
-- epoch) since :since, by outcome, with their mean and longest duration and wait (claim
-- time less ready time, never below 0; the two-argument max() is null on a null) in
-- seconds.
select a.consumer,
       (a.ended_at / :bucket_us) * :bucket_us as at,
       sum(a.outcome = 'completed') as completed,
       sum(a.outcome = 'failed') as failed,
       sum(a.outcome = 'dead_lettered') as dead_lettered,
       sum(a.outcome not in ('completed', 'failed', 'dead_lettered')) as other,
       avg((a.ended_at - a.started_at) / 1e6) as mean_duration,
       max((a.ended_at - a.started_at) / 1e6) as max_duration,
       avg(max(0, (a.started_at - a.ready_at) / 1e6)) as mean_wait,
       max(max(0, (a.started_at - a.ready_at) / 1e6)) as max_wait
  from a2_attempts a
 where a.ended_at >= :since
 group by 1, 2
 order by 1, 2;
