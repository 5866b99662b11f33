"""Monitoring on PostgreSQL: each consumer's work, dead letters and live heads across
sessions, workers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.rows import DictRow

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
from .database import Database


async def consumer_stats(db: Database) -> list[ConsumerStats]:
    rows = await db.run(db.query("consumer_stats"), {"now": db.now_param()})
    return [_stats(row) for row in rows]


def _stats(row: DictRow) -> ConsumerStats:
    return ConsumerStats(
        row["consumer"],
        int(row["ready"]),
        int(row["claimed"]),
        int(row["backing_off"]),
        int(row["dead_letters"]),
        int(row["blocked_lanes"]),
        int(row["blocked"]),
        _seconds(row["oldest_ready_age"]),
        bool(row["registered"]),
        scheduled=int(row["scheduled"]),
        paused=bool(row["paused"]),
        backfill=_backfill(row),
        oldest_blocked_age=_seconds(row["oldest_blocked_age"]),
        served_by=int(row["served_by"]),
    )


def _seconds(value: float | None) -> float | None:
    return None if value is None else float(value)


def _backfill(row: DictRow) -> BackfillProgress | None:
    """The registration's backfill columns; none before a backfill started."""
    if row["backfill_started_at"] is None:
        return None
    return BackfillProgress(
        started_at=codec.utc(row["backfill_started_at"]),
        sessions=int(row["backfill_sessions"]),
        after=row["backfill_after"],
        done_at=codec.maybe_utc(row["backfill_done_at"]),
    )


async def find_dead_letters(db: Database, query: DeadLetterQuery) -> list[Head]:
    """One keyset page of every session's dead letters."""
    params = dead_letter_page(query)
    rows = await db.run(db.query("find_dead_letters"), params)
    return [codec.head(row) for row in rows]


async def find_heads(db: Database, query: HeadQuery) -> list[FoundHead]:
    """One keyset page of every session's live heads in one state (by the database's
    clock, or the injected one)."""
    rows = await db.run(db.query("find_heads"), head_page(query, db.now_param()))
    return [FoundHead(codec.head(row), codec.utc(row["ready_at"])) for row in rows]


def head_page(query: HeadQuery, now: Any) -> dict[str, Any]:
    """``find_heads``'s parameters: the first page starts after a null time (before every
    head); ``now`` None reads the server's clock."""
    after = query.after
    return {
        "state": query.state,
        "now": now,
        "after_ready": None if after is None else after.ready_at,
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


async def heartbeat(db: Database, beat: WorkerBeat) -> None:
    params = {**beat_row(beat), "now": db.now_param()}
    await db.run(db.query("heartbeat"), params, idempotent=True)


async def forget_workers(db: Database, holders: Sequence[str]) -> None:
    if holders:
        await db.run(db.query("forget_workers"), {"holders": list(holders)}, idempotent=True)


async def workers(db: Database) -> list[WorkerInfo]:
    rows = await db.run(db.query("list_workers"), {"now": db.now_param()})
    return [
        WorkerInfo(
            WorkerBeat(
                holder=row["holder"],
                host=row["host"],
                pid=int(row["pid"]),
                consumers=tuple(row["consumers"]),
                concurrency=int(row["concurrency"]),
                started_at=codec.utc(row["started_at"]),
                in_flight=int(row["in_flight"]),
                version=row["version"],
                interval=float(row["interval_seconds"]),
                completed=int(row["completed"]),
                failed=int(row["failed"]),
            ),
            codec.utc(row["last_seen"]),
            float(row["seen_ago"]),
        )
        for row in rows
    ]
