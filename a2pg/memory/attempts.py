"""The attempt history in memory: each session's finished attempts, recorded where they end."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from ..contract.args import ActivityArgs, AttemptsArgs, PruneAttemptsArgs
from ..models import ActivityPoint, AnyLane, AttemptOutcome, AttemptRecord
from .state import CursorState, Sessions, SessionState

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def record(
    session: SessionState,
    cursor: CursorState,
    outcome: AttemptOutcome,
    now: datetime,
    *,
    error: str | None = None,
) -> None:
    """Records the attempt ``cursor``'s head is at (its dispatch as it is now: call before
    the dispatch changes) as ended at ``now``; a repeat of one recorded changes nothing."""
    dispatch = cursor.dispatch
    assert cursor.head is not None
    key = (cursor.consumer, cursor.lane, cursor.head, dispatch.attempt_count)
    if key in session.attempts:
        return
    session.attempts[key] = AttemptRecord(
        cursor.consumer,
        cursor.lane,
        cursor.head,
        dispatch.attempt_count,
        dispatch.claim_holder,
        dispatch.last_claimed_at,
        now,
        outcome,
        error,
        dispatch.last_ready_at,
    )


def attempts(session: SessionState | None, args: AttemptsArgs) -> list[AttemptRecord]:
    if session is None:
        return []
    found = [
        entry
        for (consumer, lane, index, _), entry in session.attempts.items()
        if consumer == args.consumer
        and index == args.index
        and (isinstance(args.lane, AnyLane) or lane == args.lane)
    ]
    return sorted(
        found, key=lambda entry: (entry.attempt, entry.lane is not None, entry.lane or "")
    )


def prune(sessions: Sessions, args: PruneAttemptsArgs) -> int:
    """Drops up to ``args.limit`` attempts that ended before ``args.before``, oldest first."""
    old = sorted(
        (
            (entry.ended_at, session.session_id, key)
            for session in list(sessions.by_id.values())
            for key, entry in session.attempts.items()
            if entry.ended_at < args.before
        ),
        key=lambda found: (found[0], found[1], repr(found[2])),  # a lane may be None
    )[: args.limit]
    for _, session_id, key in old:
        session = sessions.get(session_id)
        assert session is not None
        del session.attempts[key]
    return len(old)


def activity(sessions: Sessions, args: ActivityArgs) -> list[ActivityPoint]:
    """Finished attempts per consumer and bucket (aligned on the epoch) since ``since``."""
    buckets: dict[tuple[str, datetime], list[AttemptRecord]] = {}
    for session in sessions.by_id.values():
        for entry in session.attempts.values():
            if entry.ended_at >= args.since:
                micros = (entry.ended_at - EPOCH) // MICROSECOND
                start = EPOCH + (micros - micros % args.bucket_us) * MICROSECOND
                buckets.setdefault((entry.consumer, start), []).append(entry)
    points = []
    for (consumer, start), entries in sorted(buckets.items()):
        durations = [e.duration for e in entries if e.duration is not None]
        waits = [e.wait for e in entries if e.wait is not None]
        count = Counter(e.outcome for e in entries)
        points.append(
            ActivityPoint(
                consumer,
                start,
                count["completed"],
                count["failed"],
                count["dead_lettered"],
                len(entries) - count["completed"] - count["failed"] - count["dead_lettered"],
                sum(durations) / len(durations) if durations else None,
                max(durations, default=None),
                sum(waits) / len(waits) if waits else None,
                max(waits, default=None),
            )
        )
    return points
