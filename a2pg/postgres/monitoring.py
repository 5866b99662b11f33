"""Monitoring on PostgreSQL: each consumer's work, dead letters across sessions, workers."""

from __future__ import annotations

from collections.abc import Sequence

from ..models import ConsumerStats, DeadLetterQuery, Head, WorkerBeat, WorkerInfo
from . import codec
from .database import Database


async def consumer_stats(db: Database) -> list[ConsumerStats]:
    rows = await db.run(db.query("consumer_stats"), {"now": db.now_param()})
    return [
        ConsumerStats(
            row["consumer"],
            int(row["ready"]),
            int(row["claimed"]),
            int(row["backing_off"]),
            int(row["dead_letters"]),
            int(row["blocked_lanes"]),
            int(row["blocked"]),
            None if row["oldest_ready_age"] is None else float(row["oldest_ready_age"]),
            bool(row["registered"]),
        )
        for row in rows
    ]


async def find_dead_letters(db: Database, query: DeadLetterQuery) -> list[Head]:
    """One keyset page; the first starts after the key ('', '', '', 0), below every head."""
    after = query.after
    params = {
        "after_session": "" if after is None else after.session_id,
        "after_consumer": "" if after is None else after.consumer,
        "after_lane": "" if after is None else after.lane,
        "after_index": 0 if after is None else after.index,
        "consumer": query.consumer,
        "prefix": query.session_prefix,
        "error": query.error,
        "limit": query.limit,
    }
    rows = await db.run(db.query("find_dead_letters"), params)
    return [codec.head(row) for row in rows]


async def heartbeat(db: Database, beat: WorkerBeat) -> None:
    params = {
        "holder": beat.holder,
        "host": beat.host,
        "pid": beat.pid,
        "consumers": list(beat.consumers),
        "concurrency": beat.concurrency,
        "in_flight": beat.in_flight,
        "version": beat.version,
        "interval": beat.interval,
        "completed": beat.completed,
        "failed": beat.failed,
        "now": db.now_param(),
    }
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
