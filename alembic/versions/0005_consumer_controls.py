"""Consumer controls and delayed work: pause, backfill progress, lane events held until a time.

``a2_consumer_pauses`` holds the consumers an operator paused, targeted or log (claims
skip their heads, which keep their cursors); like ``a2_consumers`` it is not keyed by
session, a reference table under Citus. ``a2_consumers`` gains a log consumer's
backfill progress: a
registration with ``backfill`` (new, or with other types) starts a backfill
(``backfill_started_at``), which brings every existing session's cursor into being in
batches of sessions by id; ``backfill_after`` is the last session id done (``C`` order),
``backfill_sessions`` how many, ``backfill_done_at`` when it finished. A killed
backfill resumes after ``backfill_after``.

``a2_lane_events.not_before`` holds a lane's queued event (``Target(..., not_before=)``)
until that time once it reaches the lane's head; an event cursor's delay needs no
column (its head is held back like a failure's backoff). Every added column is nullable
or has a constant default: no table is rewritten.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        create table a2_consumer_pauses (
            consumer  text primary key,
            paused_at timestamptz not null
        )
        """
    )
    op.execute(
        """
        alter table a2_consumers
            add column backfill_started_at timestamptz,
            add column backfill_after      text,
            add column backfill_sessions   bigint not null default 0,
            add column backfill_done_at    timestamptz
        """
    )
    op.execute("alter table a2_lane_events add column not_before timestamptz")
    op.execute("update a2_meta set value = '0005' where key = 'revision'")


def downgrade() -> None:
    op.execute("alter table a2_lane_events drop column if exists not_before")
    op.execute("drop table if exists a2_consumer_pauses")
    op.execute(
        """
        alter table a2_consumers
            drop column if exists backfill_started_at,
            drop column if exists backfill_after,
            drop column if exists backfill_sessions,
            drop column if exists backfill_done_at
        """
    )
    op.execute("update a2_meta set value = '0004' where key = 'revision'")
