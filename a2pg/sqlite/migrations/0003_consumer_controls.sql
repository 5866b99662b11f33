-- Consumer controls and delayed work (as PostgreSQL's revision 0005): the consumers an
-- operator paused, a log consumer's backfill progress in a2_consumers, and the time a lane's
-- queued event is held until once it reaches the lane's head. Times are the store
-- clock's microseconds, as in every other table.
create table a2_consumer_pauses (
  consumer  text    not null primary key,
  paused_at integer not null
) strict;
alter table a2_consumers add column backfill_started_at integer;
alter table a2_consumers add column backfill_after text;
alter table a2_consumers add column backfill_sessions integer not null default 0;
alter table a2_consumers add column backfill_done_at integer;
alter table a2_lane_events add column not_before integer;
