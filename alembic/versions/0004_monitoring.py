"""Monitoring: worker heartbeats, and the dead letters found across sessions by an index.

``a2_workers`` holds one row per live worker (its last heartbeat); every time in it is
the database's (or the store's injected clock's), never a worker's own. Like
``a2_consumers`` and ``a2_presence`` it is not keyed by session: a reference table
under Citus.

``a2_cursors_dead`` holds only the dead-lettered heads, which are few whatever the
size of ``a2_cursors`` (finished cursors are the bulk of it): ``find_dead_letters``
pages it in its ``(session, consumer, lane, index)`` order, code points as Python
sorts str, and ``consumer_stats`` counts from it. Heads still to run need no new index:
they are exactly the cursors ``a2_cursors_ready`` holds.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        create table a2_workers (
            holder           text primary key,
            host             text not null,
            pid              integer not null,
            consumers        text[] not null,
            concurrency      integer not null,
            started_at       timestamptz not null,
            last_seen        timestamptz not null,
            in_flight        integer not null,
            version          text not null,
            interval_seconds double precision not null,
            completed        bigint not null,
            failed           bigint not null
        )
        """
    )
    op.execute(
        """
        create index a2_cursors_dead on a2_cursors
            (session_id collate "C", consumer collate "C", (coalesce(lane, '')) collate "C",
             head)
            where failed_at is not null
        """
    )
    op.execute("update a2_meta set value = '0004' where key = 'revision'")


def downgrade() -> None:
    op.execute("drop index if exists a2_cursors_dead")
    op.execute("drop table if exists a2_workers")
    op.execute("update a2_meta set value = '0003' where key = 'revision'")
