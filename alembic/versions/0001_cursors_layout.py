"""The cursors-1 layout: sessions, events, cursors, lane queues, snapshots, presence.

Revision ID: 0001
Revises:
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0001"
down_revision = None
branch_labels = ("a2pg",)
depends_on = None

LAYOUT = "cursors-1"

# One statement per op.execute: Citus refuses several commands in one prepared statement
# on distributed tables (revision 0007 distributes these).
UPGRADE = (
    """
create table a2_meta (
    key   text primary key,
    value text not null
)
""",
    """
-- One row per session: serializes index allocation for that session only.
create table a2_sessions (
    session_id  text primary key,
    head        bigint not null default 0,
    clear_index bigint not null default 0,
    created_at  timestamptz not null
) with (fillfactor = 80)
""",
    """
-- Listings page through sessions in code point order (as Python sorts str), whatever
-- the database's collation: this index keeps each page a range scan.
create index a2_sessions_listing on a2_sessions (session_id collate "C")
""",
    """
-- Payloads are json, not jsonb: stored as written, so numbers such as 1e300
-- come back with their type, and nothing queries inside them.
create table a2_events (
    session_id     text not null,
    idx            bigint not null,
    event_id       text not null,
    event_type     text not null,
    payload        json not null,
    created_at     timestamptz not null,
    cause_consumer text,
    cause_lane     text,
    cause_index    bigint,
    cause_attempt  integer,
    primary key (session_id, idx)
)
""",
    "create unique index a2_events_event_id on a2_events (session_id, event_id)",
    "create index a2_events_type on a2_events (session_id, event_type, idx)",
    """
-- One row per unit of consumer work. cursor_key is '#<idx>' for an event
-- cursor and 'L<lane>' for lane and log cursors. ready_at is when the head
-- becomes claimable (now, a lease end, a backoff end); null when there is
-- nothing to claim (idle, dead-lettered).
create table a2_cursors (
    session_id          text not null,
    consumer            text not null,
    cursor_key          text not null,
    kind                text not null check (kind in ('event', 'lane', 'log')),
    lane                text,
    position            bigint not null,
    head                bigint,
    types               text[],
    ready_at            timestamptz,
    attempt_count       integer not null default 0,
    first_claimed_at    timestamptz,
    last_claimed_at     timestamptz,
    claim_holder        text,
    claim_expires_at    timestamptz,
    failure_count       integer not null default 0,
    last_failed_at      timestamptz,
    last_failed_attempt integer,
    last_error          text,
    failed_at           timestamptz,
    completed_idx       bigint,
    completed_attempt   integer,
    returned_event_ids  text[],
    primary key (session_id, consumer, cursor_key)
) with (fillfactor = 70)
""",
    "create index a2_cursors_ready on a2_cursors (ready_at) where ready_at is not null",
    "create index a2_cursors_heads on a2_cursors (session_id, head) where head is not null",
    """
-- The FIFO of each lane cursor, and each lane event's completion record.
create table a2_lane_events (
    session_id         text not null,
    consumer           text not null,
    lane               text not null,
    idx                bigint not null,
    done               boolean not null default false,
    completed_attempt  integer,
    returned_event_ids text[],
    primary key (session_id, consumer, lane, idx)
) with (fillfactor = 90)
""",
    """
create table a2_snapshots (
    session_id  text not null,
    reducer     text not null,
    up_to_index bigint not null,
    state       json not null,
    updated_at  timestamptz not null,
    primary key (session_id, reducer)
)
""",
    """
create table a2_snapshot_history (
    session_id  text not null,
    reducer     text not null,
    up_to_index bigint not null,
    state       json not null,
    updated_at  timestamptz not null,
    primary key (session_id, reducer, up_to_index)
)
""",
    """
create table a2_snapshot_pins (
    session_id  text not null,
    consumer    text not null,
    cursor_key  text not null,
    event_index bigint not null,
    reducer     text not null,
    up_to_index bigint not null,
    primary key (session_id, consumer, cursor_key, event_index, reducer, up_to_index)
)
""",
    """
create index a2_snapshot_pins_checkpoint
    on a2_snapshot_pins (session_id, reducer, up_to_index)
""",
    """
-- Presence is keyed by namespace, not session: a reference table under Citus.
create table a2_presence (
    ns          text not null,
    participant text not null,
    field       text not null,
    value       json not null,
    seen        json not null,
    at          timestamptz not null,
    expires_at  timestamptz not null,
    primary key (ns, participant, field)
)
""",
    "create index a2_presence_expiry on a2_presence (ns, expires_at)",
)

DOWNGRADE = (
    "drop table if exists a2_presence",
    "drop table if exists a2_snapshot_pins",
    "drop table if exists a2_snapshot_history",
    "drop table if exists a2_snapshots",
    "drop table if exists a2_lane_events",
    "drop table if exists a2_cursors",
    "drop table if exists a2_events",
    "drop table if exists a2_sessions",
    "drop table if exists a2_meta",
)


def upgrade() -> None:
    for statement in UPGRADE:
        op.execute(statement)
    op.execute(
        "insert into a2_meta (key, value) values "
        f"('layout', '{LAYOUT}'), ('revision', '{revision}')"
    )


def downgrade() -> None:
    for statement in DOWNGRADE:
        op.execute(statement)
