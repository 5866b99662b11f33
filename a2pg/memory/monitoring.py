"""Monitoring in memory: each consumer's work across sessions, and dead letters across sessions."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from ..contract.rules import error_matches, head_state
from ..models import ConsumerStats, DeadLetterKey, DeadLetterQuery, Head
from .cursors import blocked_behind
from .state import CursorState, Sessions, SessionState


def _heads(sessions: Sessions) -> Iterator[tuple[SessionState, CursorState]]:
    """Every cursor with a head above its session's clear index."""
    for session in sessions.by_id.values():
        for cursor in session.cursors.values():
            if cursor.head is not None and cursor.head > session.clear_index:
                yield session, cursor


@dataclass(slots=True)
class _Tally:
    ready: int = 0
    claimed: int = 0
    backing_off: int = 0
    dead_letters: int = 0
    blocked_lanes: int = 0
    blocked: int = 0
    oldest_ready: datetime | None = None


def consumer_stats(
    sessions: Sessions, registered: Iterable[str], *, now: datetime
) -> list[ConsumerStats]:
    """Per consumer registered or holding heads, by name."""
    names = set(registered)
    tallies = {name: _Tally() for name in names}
    for session, cursor in _heads(sessions):
        tally = tallies.setdefault(cursor.consumer, _Tally())
        if cursor.dispatch.failed_at is not None:
            tally.dead_letters += 1
            if cursor.kind != "event":
                tally.blocked_lanes += 1
                tally.blocked += blocked_behind(session, cursor)
            continue
        assert cursor.ready_at is not None, "a live head is claimable at some time"
        state = head_state(cursor.ready_at, cursor.dispatch.claim_holder, now)
        if state == "ready":
            tally.ready += 1
            oldest = tally.oldest_ready
            tally.oldest_ready = cursor.ready_at if oldest is None else min(oldest, cursor.ready_at)
        elif state == "claimed":
            tally.claimed += 1
        else:
            tally.backing_off += 1
    return [
        ConsumerStats(
            name,
            t.ready,
            t.claimed,
            t.backing_off,
            t.dead_letters,
            t.blocked_lanes,
            t.blocked,
            None if t.oldest_ready is None else (now - t.oldest_ready).total_seconds(),
            name in names,
        )
        for name, t in sorted(tallies.items())
    ]


def find_dead_letters(sessions: Sessions, query: DeadLetterQuery) -> list[Head]:
    """One page of every session's dead letters matching ``query``, by ``DeadLetterKey``."""
    found: list[tuple[DeadLetterKey, SessionState, CursorState]] = []
    for session, cursor in _heads(sessions):
        d = cursor.dispatch
        lane, index = cursor.lane or "", cursor.head or 0
        key = DeadLetterKey(session.session_id, cursor.consumer, lane, index)
        if (
            d.failed_at is None
            or (query.after is not None and key <= query.after)
            or (query.consumer is not None and cursor.consumer != query.consumer)
            or (query.error is not None and not error_matches(d.last_error, query.error))
            or (
                query.session_prefix is not None
                and not session.session_id.startswith(query.session_prefix)
            )
        ):
            continue
        found.append((key, session, cursor))
    found.sort(key=lambda entry: entry[0])
    return [session.head_of(cursor) for _, session, cursor in found[: query.limit]]
