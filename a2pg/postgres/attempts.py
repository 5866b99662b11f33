"""The attempt history on PostgreSQL: a head's recorded attempts, and their retention.

The rows are written by the statements that end the attempts (sql/claims.sql,
sql/completions.sql: the ``record_attempts`` fragment of sql/attempts.sql); this module
only reads and prunes them.
"""

from __future__ import annotations

from typing import Any, cast

from ..contract.args import ActivityArgs, AttemptsArgs, PruneAttemptsArgs
from ..models import ActivityPoint, AnyLane, AttemptOutcome, AttemptRecord
from . import codec
from .database import Database


def record(row: Any) -> AttemptRecord:
    return AttemptRecord(
        row["consumer"],
        row["lane"],
        int(row["idx"]),
        int(row["attempt"]),
        row["holder"],
        row["started_at"],
        row["ended_at"],
        cast(AttemptOutcome, row["outcome"]),
        row["error"],
        row["ready_at"],
    )


async def attempts(db: Database, args: AttemptsArgs) -> list[AttemptRecord]:
    key = None if isinstance(args.lane, AnyLane) else codec.cursor_key(args.lane, args.index)
    params = {
        "session_id": args.session_id,
        "consumer": args.consumer,
        "idx": args.index,
        "cursor_key": key,
    }
    return [record(row) for row in await db.run(db.query("head_attempts"), params)]


async def prune(db: Database, args: PruneAttemptsArgs) -> int:
    params = {"before": args.before, "limit": args.limit}
    rows = await db.run(db.query("prune_attempts"), params, idempotent=True)
    return len(rows)


async def activity(db: Database, args: ActivityArgs) -> list[ActivityPoint]:
    params = {"since": args.since, "bucket_us": args.bucket_us}
    return [
        ActivityPoint(
            row["consumer"],
            row["at"],
            int(row["completed"]),
            int(row["failed"]),
            int(row["dead_lettered"]),
            int(row["other"]),
            row["mean_duration"],
            row["max_duration"],
            row["mean_wait"],
            row["max_wait"],
        )
        for row in await db.run(db.query("activity"), params)
    ]
