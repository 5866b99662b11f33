"""The attempt history on SQLite: finished attempts recorded where they end, read, pruned."""

from __future__ import annotations

import sqlite3
from typing import cast

from ..contract.args import ActivityArgs, AttemptsArgs, PruneAttemptsArgs
from ..models import ActivityPoint, AnyLane, AttemptOutcome, AttemptRecord
from . import codec
from .database import Tx, rows


def record(
    tx: Tx,
    session_id: str,
    cursor: sqlite3.Row,
    outcome: AttemptOutcome,
    *,
    error: str | None = None,
) -> None:
    """Records the attempt the cursor row's head is at (the row as read before the change
    that ends it) as ended now."""
    tx.run(
        "record_attempt",
        {
            "session_id": session_id,
            "consumer": cursor["consumer"],
            "cursor_key": cursor["cursor_key"],
            "idx": cursor["head"],
            "attempt": cursor["attempt_count"],
            "lane": cursor["lane"],
            "holder": cursor["claim_holder"],
            "ready_at": cursor["last_ready_at"],
            "started_at": cursor["last_claimed_at"],
            "ended_at": tx.now_us,
            "outcome": outcome,
            "error": error,
        },
    )


def attempts(conn: sqlite3.Connection, args: AttemptsArgs) -> list[AttemptRecord]:
    key = None if isinstance(args.lane, AnyLane) else codec.cursor_key(args.lane, args.index)
    params = {
        "session_id": args.session_id,
        "consumer": args.consumer,
        "idx": args.index,
        "cursor_key": key,
    }
    return [
        AttemptRecord(
            row["consumer"],
            row["lane"],
            int(row["idx"]),
            int(row["attempt"]),
            row["holder"],
            codec.maybe_time(row["started_at"]),
            codec.time_of(int(row["ended_at"])),
            cast(AttemptOutcome, row["outcome"]),
            row["error"],
            codec.maybe_time(row["ready_at"]),
        )
        for row in rows(conn, "head_attempts", params)
    ]


def prune(tx: Tx, args: PruneAttemptsArgs) -> int:
    return tx.run("prune_attempts", {"before": codec.micros(args.before), "limit": args.limit})


def activity(conn: sqlite3.Connection, args: ActivityArgs) -> list[ActivityPoint]:
    params = {"since": codec.micros(args.since), "bucket_us": args.bucket_us}
    return [
        ActivityPoint(
            row["consumer"],
            codec.time_of(int(row["at"])),
            int(row["completed"]),
            int(row["failed"]),
            int(row["dead_lettered"]),
            int(row["other"]),
            row["mean_duration"],
            row["max_duration"],
            row["mean_wait"],
            row["max_wait"],
        )
        for row in rows(conn, "activity", params)
    ]
