"""The parameters both SQL backends bind to their monitoring statements: one mapping
from the contract's values to the named statements' parameters (no I/O)."""

from __future__ import annotations

from typing import Any

from ..models import DeadLetterQuery, WorkerBeat


def dead_letter_page(query: DeadLetterQuery) -> dict[str, Any]:
    """``find_dead_letters``: the first page starts after ('', '', '', 0), below every head."""
    after = query.after
    return {
        "after_session": "" if after is None else after.session_id,
        "after_consumer": "" if after is None else after.consumer,
        "after_lane": "" if after is None else after.lane,
        "after_index": 0 if after is None else after.index,
        "consumer": query.consumer,
        "prefix": query.session_prefix,
        "error": query.error,
        "limit": query.limit,
    }


def beat_row(beat: WorkerBeat) -> dict[str, Any]:
    """``heartbeat``: the beat's columns (``consumers`` as a list: each backend encodes it)."""
    return {
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
    }
