-- Presence: fields written by participants, last writer wins, read with expired rows
-- swept. Conventions: README.md beside this file.

-- name: presence_write
-- Last writer wins per field by `at`, unless the stored value has expired.
insert into a2_presence as p (ns, participant, field, value, seen, at, expires_at)
values (:ns, :participant, :field, :value, :seen, :at, :expires_at)
on conflict (ns, participant, field) do update
  set value = excluded.value, seen = excluded.seen, at = excluded.at,
      expires_at = excluded.expires_at
where p.at <= excluded.at or p.expires_at <= :now
returning field;

-- name: presence_sweep
delete from a2_presence where ns = :ns and expires_at <= :now;

-- name: presence_read
select p.participant, p.field, p.value, p.seen, p.at, p.expires_at
  from a2_presence p
 where p.ns = :ns and p.expires_at > :now and p.value <> 'null'
 order by p.participant, p.field;
