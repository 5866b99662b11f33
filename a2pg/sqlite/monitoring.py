"""Monitoring on SQLite: each consumer's work, dead letters and live heads across sessions,
worker rows."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any

from ..contract.params import beat_row, dead_letter_page
from ..models import (
    BackfillProgress,
    ConsumerStats,
    DeadLetterQuery,
    FoundHead,
    Head,
    HeadQuery,
    WorkerBeat,
    WorkerInfo,
)
from . import codec
from .database import Tx, rows


def consumer_stats(conn: sqlite3.Connection, now: datetime) -> list[ConsumerStats]:
    """Per consumer holding heads, registered, paused or served by a live worker, by name
    (see the ``consumer_stats`` statement); the lags are counted on the store's clock."""
    return [_stats(row, now) for row in rows(conn, "consumer_stats", {"now": codec.micros(now)})]


def _stats(row: sqlite3.Row, now: datetime) -> ConsumerStats:
    return ConsumerStats(
        row["consumer"],
        int(row["ready"]),
        int(row["claimed"]),
        int(row["backing_off"]),
        int(row["dead_letters"]),
        int(row["blocked_lanes"]),
        int(row["blocked"]),
        _age(row["oldest_ready"], now),
        bool(row["registered"]),
        scheduled=int(row["scheduled"]),
        paused=bool(row["paused"]),
        backfill=_backfill(row),
        oldest_blocked_age=_age(row["oldest_blocked"], now),
        served_by=int(row["served_by"]),
    )


def _age(since_us: int | None, now: datetime) -> float | None:
    return None if since_us is None else (now - codec.time_of(since_us)).total_seconds()


def _backfill(row: sqlite3.Row) -> BackfillProgress | None:
    """The registration's backfill columns; none before a backfill started."""
    if row["backfill_started_at"] is None:
        return None
    return BackfillProgress(
        started_at=codec.time_of(row["backfill_started_at"]),
        sessions=int(row["backfill_sessions"]),
        after=row["backfill_after"],
        done_at=codec.maybe_time(row["backfill_done_at"]),
    )


def find_dead_letters(conn: sqlite3.Connection, query: DeadLetterQuery) -> list[Head]:
    """One keyset page of every session's dead letters."""
    params = dead_letter_page(query)
    return [codec.head(row) for row in rows(conn, "find_dead_letters", params)]


SMALLEST = -(2**63)
LARGEST = 2**63 - 1
"""The integer range of SQLite: the open ends of a range of times in microseconds."""


def find_heads(conn: sqlite3.Connection, query: HeadQuery, now: datetime) -> list[FoundHead]:
    """One keyset page of every session's live heads in one state at ``now``."""
    found = rows(conn, "find_heads", head_page(query, codec.micros(now)))
    return [FoundHead(codec.head(row), codec.time_of(row["ready_at"])) for row in found]


def head_page(query: HeadQuery, now_us: int) -> dict[str, Any]:
    """``find_heads``'s parameters: the state as a range of ready_at (``start`` through
    ``high``: up to now when ready, after now else), which starts at the page key's time;
    the first page is after the smallest key."""
    after = query.after
    after_us = SMALLEST if after is None else codec.micros(after.ready_at)
    low, high = (SMALLEST, now_us) if query.state == "ready" else (now_us + 1, LARGEST)
    return {
        "state": query.state,
        "start": max(low, after_us),
        "high": high,
        "after_ready": after_us,
        "after_session": "" if after is None else after.session_id,
        "after_index": 0 if after is None else after.index,
        "after_consumer": "" if after is None else after.consumer,
        "after_lane": "" if after is None else after.lane,
        "consumer": query.consumer,
        "event_type": query.event_type,
        "prefix": query.session_prefix,
        "error": query.error,
        "limit": query.limit,
    }


def heartbeat(tx: Tx, beat: WorkerBeat) -> None:
    """Inserts or replaces the holder's row, every time in it the store's clock's."""
    row = beat_row(beat)
    tx.run("heartbeat", {**row, "consumers": json.dumps(row["consumers"]), "now": tx.now_us})


def forget_workers(tx: Tx, holders: list[str]) -> None:
    for holder in holders:
        tx.run("forget_worker", {"holder": holder})


def workers(conn: sqlite3.Connection, now: datetime) -> list[WorkerInfo]:
    """Every worker row by holder, with how long ago it was seen (never negative)."""
    found = []
    for row in rows(conn, "list_workers"):
        seen = codec.time_of(row["last_seen"])
        beat = WorkerBeat(
            holder=row["holder"],
            host=row["host"],
            pid=int(row["pid"]),
            consumers=tuple(json.loads(row["consumers"])),
            concurrency=int(row["concurrency"]),
            started_at=codec.time_of(row["started_at"]),
            in_flight=int(row["in_flight"]),
            version=row["version"],
            interval=float(row["interval_seconds"]),
            completed=int(row["completed"]),
            failed=int(row["failed"]),
        )
        found.append(WorkerInfo(beat, seen, max(0.0, (now - seen).total_seconds())))
    return found
