"""Citus: the session tables distributed by session_id, the others reference tables.

On a database with the ``citus`` extension, every table whose key leads with
``session_id`` becomes a distributed table sharded by it, co-located with
``a2_sessions`` (a session's rows of every table in one shard group, so a session's
statements stay on one node); ``a2_sessions`` gets a colocation group of its own, of
``-x citus_shards=N`` (``a2pg migrate --citus-shards N``, ``A2PG_CITUS_SHARDS``) shards,
else Citus's default (``citus.shard_count``). The tables not keyed by session become
reference tables, copied to every node: they are small, and every session's statements
read them. Rows already there are kept: Citus copies them to the shards, then the
coordinator's local copy is truncated. Each table goes through
``a2pg.postgres.citus.distribute``, the helper a later revision that creates a table
uses too.

On plain PostgreSQL the revision changes nothing but the revision number: the helper's
statement finds no Citus and does nothing.

The downgrade makes every table local again (``undistribute_table``: Citus copies the
rows back to the coordinator).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

from a2pg.postgres import citus

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# a2_sessions first: the others are co-located with it.
DISTRIBUTED = (
    "a2_sessions",
    "a2_events",
    "a2_cursors",
    "a2_lane_events",
    "a2_snapshots",
    "a2_snapshot_history",
    "a2_snapshot_pins",
    "a2_attempts",
)
REFERENCE = (
    "a2_meta",
    "a2_consumers",
    "a2_consumer_pauses",
    "a2_workers",
    "a2_audit",
    "a2_presence",
)
VERSION_TABLE = "a2_alembic_version"
"""a2pg's version table, a reference table too; absent when a host environment keeps
a2pg's revisions in its own version table, which is left alone."""


def upgrade() -> None:
    for table in DISTRIBUTED:
        citus.distribute(op, table, "distributed")
    for table in REFERENCE:
        citus.distribute(op, table, "reference")
    citus.distribute(op, VERSION_TABLE, "reference", if_exists=True)
    op.execute("update a2_meta set value = '0007' where key = 'revision'")


def downgrade() -> None:
    citus.undistribute(op, VERSION_TABLE)
    for table in reversed(REFERENCE):
        citus.undistribute(op, table)
    for table in reversed(DISTRIBUTED):
        citus.undistribute(op, table)
    op.execute("update a2_meta set value = '0006' where key = 'revision'")
