-- The operators' audit log: one row per action the dashboard or the CLI ran, who, when
-- and what. Read newest first by the index on (at, id); ids compare collate "C" (code
-- points, as Python orders str), ties of `at` being rare.
-- Conventions: README.md beside this file.

-- name: record_audit
-- One entry at the store's time. The id is generated before the statement, so a retry
-- after a lost connection sends the same one: if its first try committed, the row is
-- found and returned as stored (the no-op update is what makes `returning` see it).
insert into {schema}.a2_audit as a (id, at, actor, action, session_id, consumer, lane, idx,
                                    detail)
values (%(id)s, coalesce(%(now)s::timestamptz, pg_catalog.statement_timestamp()), %(actor)s,
        %(action)s, %(session_id)s, %(consumer)s, %(lane)s, %(index)s::bigint,
        %(detail)s::json)
on conflict (id) do update set id = excluded.id
returning a.*;

-- name: audit_log_first
-- The newest page.
select a.*
  from {schema}.a2_audit a
 order by a.at desc, a.id collate "C" desc
 limit %(limit)s::bigint;

-- name: audit_log_after
-- The page after entry `after`: the entries older by (at, id). Its time, looked up by id
-- (an InitPlan), bounds the index scan; an id naming no entry bounds it by null: nothing.
select a.*
  from {schema}.a2_audit a
 where a.at <= (select k.at from {schema}.a2_audit k where k.id = %(after)s::text)
   and (a.at < (select k.at from {schema}.a2_audit k where k.id = %(after)s::text)
        or a.id collate "C" < %(after)s::text collate "C")
 order by a.at desc, a.id collate "C" desc
 limit %(limit)s::bigint;
