-- 0002: what a2pg adds to the seed's layout, and the seed's data converted to it.
--
-- * Times become integer microseconds since the epoch (UTC), as precise as Python's
--   datetime and PostgreSQL's timestamptz: the seed's milliseconds are scaled.
-- * a2_events.id_retired: an id stored only below a clear marker may be appended again;
--   the old event keeps its row (streams behind the clear still read it) until reclaim
--   and gives up its id, so the unique index holds the ids of events not retired.
-- * a2_cursors.ready_at: when the head becomes claimable (now, a lease end, a backoff
--   end; null when idle, dead-lettered or cleared). Its index, in claim_any's order,
--   lets claim_any read the oldest ready heads without sorting.
-- * a2_consumers: the consumer registry (SPEC 2.9).
-- * a2_workers and a2_cursors_dead: what monitoring reads (below).
-- * Lane cursors a clear left behind go, as a2pg's clear drops them: the seed kept them
--   below its marker (revived by the lane's next event).
-- * Presence rows stay: their times are scaled, and `seen`, which the seed stored as
--   given (text), becomes the JSON string of that text, as a2pg stores JSON.
-- * The migration is one way: the seed's store would read the microseconds as
--   milliseconds (and miss every leased head), so a2_meta refuses the layout record it
--   writes at every open, with an error naming a2pg (a2pg never writes it again).

update a2_events set created_at = created_at * 1000;

update a2_cursors
   set first_claimed_at = first_claimed_at * 1000,
       last_claimed_at = last_claimed_at * 1000,
       claim_expires_at = claim_expires_at * 1000,
       last_failed_at = last_failed_at * 1000,
       failed_at = failed_at * 1000;

update a2_snapshots set updated_at = updated_at * 1000;

update a2_snapshot_history set updated_at = updated_at * 1000;

delete from a2_cursors
 where kind = 'lane'
   and (head is null or head <= (select k.clear_index from a2_clears k
                                  where k.session_id = a2_cursors.session_id))
   and position <= (select k.clear_index from a2_clears k
                     where k.session_id = a2_cursors.session_id);

update a2_presence
   set seen = case when seen is null then 'null' else json_quote(seen) end,
       at = at * 1000,
       expires_at = expires_at * 1000;

create trigger a2_meta_one_way before insert on a2_meta when new.key = 'layout'
begin
  select raise(abort, 'a2pg migrated this SQLite file, one way: the JavaScript SQLite store cannot read it (its times are microseconds now); open it with a2pg, or give that store a copy made before a2pg migrate --sqlite');
end;

alter table a2_events add column id_retired integer not null default 0;

drop index if exists a2_events_session_event_id;

create unique index a2_events_session_event_id
  on a2_events (session_id, event_id) where id_retired = 0;

alter table a2_cursors add column ready_at integer;

update a2_cursors
   set ready_at = coalesce(claim_expires_at, last_failed_at, last_claimed_at, 0)
 where head is not null and failed_at is null
   and head > coalesce((select k.clear_index from a2_clears k
                         where k.session_id = a2_cursors.session_id), 0);

create index a2_cursors_ready
  on a2_cursors (ready_at, session_id, head, consumer, coalesce(lane, ''))
  where ready_at is not null;

create table a2_consumers (
  name          text    not null primary key,
  lane          text    not null,
  types         text,
  backfill      integer not null,
  registered_at integer not null,
  updated_at    integer not null
) strict;

-- Monitoring: worker heartbeats (one row per live worker; every time in it is the store's
-- clock's) and an index holding only the dead-lettered heads, in find_dead_letters'
-- order, which consumer_stats counts from too.
create table a2_workers (
  holder           text    not null primary key,
  host             text    not null,
  pid              integer not null,
  consumers        text    not null,
  concurrency      integer not null,
  started_at       integer not null,
  last_seen        integer not null,
  in_flight        integer not null,
  version          text    not null,
  interval_seconds real    not null,
  completed        integer not null,
  failed           integer not null
) strict;

create index a2_cursors_dead
  on a2_cursors (session_id, consumer, coalesce(lane, ''), head)
  where failed_at is not null;
