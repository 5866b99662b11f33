-- 0001: the cursors-1 layout of the seed's SQLite store (experimental-a2 0.22.0,
-- dist/store-sqlite.js), table for table and index for index, so that a database that
-- store wrote is recognised as this revision and migrated on from it. Times are the
-- seed's integer milliseconds until 0002. Parts of the seed's schema lie outside the
-- hunks of its diff (the snapshot, clear and presence tables): those are rebuilt from
-- the columns its statements name. `if not exists` throughout: on a seed database every
-- table is there already.

create table if not exists a2_meta (
  key   text not null primary key,
  value text not null
) strict;

create table if not exists a2_events (
  session_id   text    not null,
  idx          integer not null,
  event_type   text    not null,
  payload      text    not null,
  event_id     text    not null,
  created_at   integer not null,
  cause        text,
  primary key (session_id, idx)
) strict;

create unique index if not exists a2_events_session_event_id
  on a2_events (session_id, event_id);

create index if not exists a2_events_types on a2_events (session_id, event_type, idx);

create table if not exists a2_cursors (
  session_id   text    not null,
  consumer     text    not null,
  cursor_key   text    not null,
  lane         text,
  kind         text    not null,
  position     integer not null,
  head         integer,
  types        text,
  attempt_count integer not null default 0,
  first_claimed_at integer,
  last_claimed_at integer,
  claim_holder text,
  claim_expires_at integer,
  failure_count integer not null default 0,
  last_failed_at integer,
  last_failed_attempt integer,
  last_error   text,
  failed_at    integer,
  completed_idx integer,
  completed_attempt integer,
  returned_event_ids text,
  primary key (session_id, consumer, cursor_key)
) strict;

create index if not exists a2_cursors_heads
  on a2_cursors (session_id, head) where head is not null;

create table if not exists a2_lane_events (
  session_id   text    not null,
  consumer     text    not null,
  lane         text    not null,
  idx          integer not null,
  done         integer not null default 0,
  completed_attempt integer,
  returned_event_ids text,
  primary key (session_id, consumer, lane, idx)
) strict;

create table if not exists a2_snapshots (
  session_id   text    not null,
  reducer_name text    not null,
  up_to_index  integer not null,
  state        text    not null,
  updated_at   integer not null,
  primary key (session_id, reducer_name)
) strict;

create table if not exists a2_snapshot_history (
  session_id   text    not null,
  reducer_name text    not null,
  up_to_index  integer not null,
  state        text    not null,
  updated_at   integer not null,
  primary key (session_id, reducer_name, up_to_index)
) strict;

create table if not exists a2_snapshot_pins (
  session_id   text    not null,
  consumer     text    not null,
  cursor_key   text    not null,
  event_index  integer not null,
  reducer_name text    not null,
  up_to_index  integer not null,
  primary key (session_id, consumer, cursor_key, event_index, reducer_name, up_to_index)
) strict;

create index if not exists a2_snapshot_pins_checkpoint
  on a2_snapshot_pins (session_id, reducer_name, up_to_index);

create table if not exists a2_clears (
  session_id   text    not null primary key,
  clear_index  integer not null
) strict;

create table if not exists a2_presence (
  ns           text    not null,
  participant  text    not null,
  field        text    not null,
  value        text    not null,
  seen         text,
  at           integer not null,
  expires_at   integer not null,
  primary key (ns, participant, field)
) strict;

create index if not exists a2_presence_expiry on a2_presence (ns, expires_at);

insert into a2_meta (key, value) values ('layout', 'cursors-1')
on conflict (key) do nothing;
