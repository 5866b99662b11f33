"""Stores with history: a schema of its own holding N already-completed events, loaded fast.

A drain's rate should not depend on how much finished work the store keeps. To see
whether it does, the history phase drains the same backlog in two stores that differ
only in history (``history_base`` and ``history`` completed events).

Each history session holds ``PER_SESSION`` events (the last one the remainder), in
sessions ``bench-history-<n>``, and every event left behind exactly the rows a
targeted event completed by its first attempt leaves:

- ``a2_sessions``: head = the session's event count, clear index 0;
- ``a2_events``: index 1..n, a random UUID as id, type ``bench.history``, payload
  ``{"n": index}``, no cause;
- ``a2_cursors``: one idle event cursor per event for the drain's consumer
  (key ``#<index>``, position = index, no head, not ready, attempt count 0, completed
  by attempt 1 with no returned events).

They are written with set-based INSERTs straight into the a2_ tables (the store's
append would take minutes for a million), in transactions of ``CHUNK`` sessions,
then the tables are vacuumed and analysed so autovacuum does not wake up during the
measured drains. ``check`` reads a history session back through the store.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import TextIO

from psycopg import sql

from ..store import Store
from .ledger import Ledger
from .phases import Check
from .worker import DRAIN_CONSUMER

PER_SESSION = 100
CHUNK = 1_000
"""History sessions written per transaction (100,000 events)."""
PREFIX = "bench-history-"
HISTORY_TYPE = "bench.history"
TABLES = ("a2_sessions", "a2_events", "a2_cursors")

LOAD = [
    """
insert into {sessions} (session_id, head, clear_index, created_at)
select %(prefix)s || g, least(%(per)s, %(size)s - (g - 1) * %(per)s), 0, %(at)s
  from generate_series(%(lo)s::bigint, %(hi)s::bigint) g
""",
    """
insert into {events} (session_id, idx, event_id, event_type, payload, created_at)
select %(prefix)s || g, i, gen_random_uuid()::text, %(type)s, json_build_object('n', i), %(at)s
  from generate_series(%(lo)s::bigint, %(hi)s::bigint) g
 cross join lateral generate_series(1, least(%(per)s, %(size)s - (g - 1) * %(per)s)) i
""",
    """
insert into {cursors} (session_id, consumer, cursor_key, kind, lane, position, head,
                       ready_at, completed_idx, completed_attempt, returned_event_ids)
select %(prefix)s || g, %(consumer)s, '#' || i, 'event', null, i, null,
       null, i, 1, array[]::text[]
  from generate_series(%(lo)s::bigint, %(hi)s::bigint) g
 cross join lateral generate_series(1, least(%(per)s, %(size)s - (g - 1) * %(per)s)) i
""",
]

FORGET = [
    "delete from {cursors} where session_id = any(%(ids)s::text[])",
    "delete from {lane_events} where session_id = any(%(ids)s::text[])",
    "delete from {events} where session_id = any(%(ids)s::text[])",
    "delete from {sessions} where session_id = any(%(ids)s::text[])",
]


def schema_name(base: str, size: int) -> str:
    """A fresh schema name for a store with ``size`` history events (63 bytes at most)."""
    return f"{base[:30]}_history_{size}_{uuid.uuid4().hex[:6]}"


def history_sessions(size: int) -> int:
    return -(-size // PER_SESSION)


def _format(template: str, schema: str) -> sql.Composed:
    return sql.SQL(template).format(
        sessions=sql.Identifier(schema, "a2_sessions"),
        events=sql.Identifier(schema, "a2_events"),
        cursors=sql.Identifier(schema, "a2_cursors"),
        lane_events=sql.Identifier(schema, "a2_lane_events"),
    )


async def load(ledger: Ledger, schema: str, size: int, log: TextIO) -> None:
    """Writes ``size`` completed events into the (migrated, empty) store in ``schema``."""
    conn = ledger.conn
    cur = await conn.execute("select now() - interval '1 day'")
    row = await cur.fetchone()
    at = row[0] if row else None
    count = history_sessions(size)
    for lo in range(1, count + 1, CHUNK):
        params = {
            "prefix": PREFIX,
            "per": PER_SESSION,
            "size": size,
            "lo": lo,
            "hi": min(count, lo + CHUNK - 1),
            "at": at,
            "type": HISTORY_TYPE,
            "consumer": DRAIN_CONSUMER,
        }
        async with conn.transaction():
            await conn.execute("set local synchronous_commit to off")
            for template in LOAD:
                await conn.execute(_format(template, schema), params)
        if count > CHUNK:
            log.write(".")
            log.flush()
    for table in TABLES:
        await conn.execute(sql.SQL("vacuum analyze {}").format(sql.Identifier(schema, table)))


async def check(store: Store, size: int) -> Check:
    """Reads the first history session back through the store: its events in order, and no
    cursor listed (every one is finished)."""
    session = f"{PREFIX}1"
    expected = min(PER_SESSION, size)
    events = await store.read(session)
    cursors = await store.cursors(session)
    ok = (
        [e.index for e in events] == list(range(1, expected + 1))
        and all(e.type == HISTORY_TYPE and e.payload == {"n": e.index} for e in events)
        and not cursors
    )
    return Check(
        f"history {size:,}: the store reads a loaded session",
        ok,
        f"{len(events)} of {expected} events read, {len(cursors)} cursors listed",
    )


async def forget(ledger: Ledger, schema: str, ids: Sequence[str]) -> None:
    """Deletes a drained backlog's sessions, so each run drains beside the same history."""
    async with ledger.conn.transaction():
        for template in FORGET:
            await ledger.conn.execute(_format(template, schema), {"ids": list(ids)})


async def migrate(dsn: str, schema: str) -> None:
    from ..postgres.migrate import upgrade

    await asyncio.to_thread(upgrade, dsn, schema)
