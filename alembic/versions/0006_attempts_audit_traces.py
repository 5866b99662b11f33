"""Attempt history, the operators' audit log, and the trace context an event carries.

``a2_attempts`` keeps one row per finished attempt of a head: who held it, when it was
claimed and when it ended, and how (``completed``, ``failed``, ``dead_lettered``,
``released``, ``lapsed``, ``cancelled``), with the error (bounded by
``Limits.max_error_length``). It is written in the statement or transaction that ends
the attempt (a completion, a failure, a release, the claim that finds a lease lapsed, a
cancel), never by a claim itself: the attempt's start is the cursor's
``last_claimed_at`` until then, and when its head became claimable (its wait began) the
cursor's new ``last_ready_at``, which the claim copies from ``ready_at``. ``a2pg
reclaim`` drops a session's rows below its clear marker with its events; ``a2pg
prune-attempts --older-than`` the rest past retention.
Keyed by session like the cursors (a distributed table under Citus).

``a2_audit`` records every operator action (who, from the dashboard's identity or the
CLI's user; when; what; on which head or consumer). Not keyed by session: a reference
table under Citus.

``a2_events.trace_parent`` holds the W3C ``traceparent`` (and ``tracestate``) of the span
that appended the event, when tracing is on: outside the user's payload, so consumers'
attempt spans can link to the request that caused them. Nullable: no rewrite.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        create table a2_attempts (
            session_id  text not null,
            consumer    text not null,
            cursor_key  text not null,
            idx         bigint not null,
            attempt     integer not null,
            lane        text,
            holder      text,
            ready_at    timestamptz,
            started_at  timestamptz,
            ended_at    timestamptz not null,
            outcome     text not null,
            error       text,
            primary key (session_id, consumer, cursor_key, idx, attempt)
        )
        """
    )
    op.execute("create index a2_attempts_ended on a2_attempts (ended_at)")
    op.execute(
        """
        create table a2_audit (
            id         text primary key,
            at         timestamptz not null,
            actor      text not null,
            action     text not null,
            session_id text,
            consumer   text,
            lane       text,
            idx        bigint,
            detail     json not null
        )
        """
    )
    op.execute("create index a2_audit_at on a2_audit (at, id)")
    op.execute("alter table a2_events add column trace_parent text")
    op.execute("alter table a2_cursors add column last_ready_at timestamptz")
    op.execute("update a2_meta set value = '0006' where key = 'revision'")


def downgrade() -> None:
    op.execute("alter table a2_events drop column if exists trace_parent")
    op.execute("alter table a2_cursors drop column if exists last_ready_at")
    op.execute("drop table if exists a2_audit")
    op.execute("drop table if exists a2_attempts")
    op.execute("update a2_meta set value = '0005' where key = 'revision'")
