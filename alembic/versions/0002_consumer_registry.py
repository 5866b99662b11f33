"""The consumer registry: log consumers that every appender wakes (SPEC 2.9).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        create table a2_consumers (
            name          text primary key,
            lane          text not null,
            types         text[],
            backfill      boolean not null,
            registered_at timestamptz not null,
            updated_at    timestamptz not null
        )
        """
    )
    op.execute("update a2_meta set value = '0002' where key = 'revision'")


def downgrade() -> None:
    op.execute("drop table if exists a2_consumers")
    op.execute("update a2_meta set value = '0001' where key = 'revision'")
