-- The operators' audit log: one row per action the dashboard or the CLI ran, who, when
-- and what; read newest first by the index on (at, id). Text compares by bytes (UTF-8:
-- code points, as Python orders str).

-- name: record_audit
-- One entry at the transaction's time. An id already stored (a generator handing one out
-- twice) returns that row as stored, as on PostgreSQL.
insert into a2_audit as a (id, at, actor, action, session_id, consumer, lane, idx, detail)
values (:id, :now, :actor, :action, :session_id, :consumer, :lane, :idx, :detail)
on conflict (id) do update set id = excluded.id
returning *;

-- name: audit_log_first
-- The newest page.
select a.* from a2_audit a order by a.at desc, a.id desc limit :limit;

-- name: audit_log_after
-- The page after entry `after`: the entries older by (at, id). Its time, looked up by id,
-- bounds the index scan; an id naming no entry bounds it by null: nothing.
select a.*
  from a2_audit a
 where a.at <= (select k.at from a2_audit k where k.id = :after)
   and (a.at < (select k.at from a2_audit k where k.id = :after) or a.id < :after)
 order by a.at desc, a.id desc
 limit :limit;
