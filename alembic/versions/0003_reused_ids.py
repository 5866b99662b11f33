"""Reused ids: an event below a clear marker whose id is appended again stays (SPEC 2.6).

An id stored only below the clear marker may be appended again. Up to 0002 the append
deleted the old event, so a stream that started before the clear skipped its index and
reclaim never counted it. From 0003 the append marks the old event ``id_retired``
instead: it keeps its row (and its id, for streams behind the clear) until reclaim, and
leaves the unique index of event ids, which now holds only the events not retired. So ids
stay unique among the live events, and append's dedup is still one probe of that index.
A clear writes nothing to the events below it: only an append that reuses an id retires
the one event that held it.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # The column's default is stored in the catalog (no table rewrite); every event up
    # to 0002 owns its id. The index keeps its name: PARTIAL_DUPLICATE_BATCH is told by it.
    op.execute("alter table a2_events add column id_retired boolean not null default false")
    op.execute("drop index a2_events_event_id")
    op.execute(
        """
        create unique index a2_events_event_id on a2_events (session_id, event_id)
            where not id_retired
        """
    )
    op.execute("update a2_meta set value = '0003' where key = 'revision'")


def downgrade() -> None:
    # 0002 keeps one event per id: the retired ones go, as 0002's append would have
    # deleted them (they are all below a clear marker, out of every read but a stream's).
    op.execute("delete from a2_events where id_retired")
    op.execute("drop index a2_events_event_id")
    op.execute("create unique index a2_events_event_id on a2_events (session_id, event_id)")
    op.execute("alter table a2_events drop column id_retired")
    op.execute("update a2_meta set value = '0002' where key = 'revision'")
