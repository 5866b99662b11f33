-- Attempt history, the operators' audit log and the trace context an event carries (as
-- PostgreSQL's revision 0006). Times are the store clock's microseconds.
create table a2_attempts (
  session_id  text    not null,
  consumer    text    not null,
  cursor_key  text    not null,
  idx         integer not null,
  attempt     integer not null,
  lane        text,
  holder      text,
  ready_at    integer,
  started_at  integer,
  ended_at    integer not null,
  outcome     text    not null,
  error       text,
  primary key (session_id, consumer, cursor_key, idx, attempt)
) strict;
create index a2_attempts_ended on a2_attempts (ended_at);
create table a2_audit (
  id         text    not null primary key,
  at         integer not null,
  actor      text    not null,
  action     text    not null,
  session_id text,
  consumer   text,
  lane       text,
  idx        integer,
  detail     text    not null
) strict;
create index a2_audit_at on a2_audit (at, id);
alter table a2_events add column trace_parent text;
alter table a2_cursors add column last_ready_at integer;
