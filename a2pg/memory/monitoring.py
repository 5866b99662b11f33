"""Monitoring in memory: each consumer's work across sessions, dead letters and live heads
across sessions."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime

from ..contract.rules import error_matches, head_state
from ..models import (
    BackfillProgress,
    ConsumerStats,
    DeadLetterKey,
    DeadLetterQuery,
    FoundHead,
    Head,
    HeadKey,
    HeadQuery,
    WorkerInfo,
    WorkState,
)
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
    scheduled: int = 0
    dead_letters: int = 0
    blocked_lanes: int = 0
    blocked: int = 0
    oldest_ready: datetime | None = None
    oldest_blocked: datetime | None = None
    served_by: int = 0


def _earliest(known: datetime | None, at: datetime) -> datetime:
    return at if known is None else min(known, at)


def _age(since: datetime | None, now: datetime) -> float | None:
    return None if since is None else (now - since).total_seconds()


def consumer_stats(
    sessions: Sessions,
    registered: Iterable[str],
    *,
    paused: Iterable[str] = (),
    backfills: Mapping[str, BackfillProgress] | None = None,
    workers: Iterable[WorkerInfo] = (),
    now: datetime,
) -> list[ConsumerStats]:
    """Per consumer, by name: every one holding heads, registered, paused or named by a
    live worker's heartbeat (the last three with zeros when they have nothing), so an
    alert on a count reads 0 rather than no data. ``backfills``: the registry's progress,
    shown for registered consumers only (it lives in their registration)."""
    names = set(registered)
    stopped = set(paused)
    tallies = {name: _Tally() for name in names | stopped}
    for worker in workers:
        if not worker.stale:
            for name in set(worker.beat.consumers):
                tallies.setdefault(name, _Tally()).served_by += 1
    for session, cursor in _heads(sessions):
        tally = tallies.setdefault(cursor.consumer, _Tally())
        d = cursor.dispatch
        if d.failed_at is not None:
            tally.dead_letters += 1
            if cursor.kind != "event":
                tally.blocked_lanes += 1
                tally.blocked += blocked_behind(session, cursor)
                tally.oldest_blocked = _earliest(tally.oldest_blocked, d.failed_at)
            continue
        assert cursor.ready_at is not None, "a live head is claimable at some time"
        state = head_state(cursor.ready_at, d.claim_holder, now)
        if state == "ready":
            tally.ready += 1
            tally.oldest_ready = _earliest(tally.oldest_ready, cursor.ready_at)
        elif state == "claimed":
            tally.claimed += 1
        elif d.failure_count > 0:
            tally.backing_off += 1
        else:  # held back by a target's not_before, never failed
            tally.scheduled += 1
    progress = backfills or {}
    return [
        ConsumerStats(
            name,
            t.ready,
            t.claimed,
            t.backing_off,
            t.dead_letters,
            t.blocked_lanes,
            t.blocked,
            _age(t.oldest_ready, now),
            name in names,
            scheduled=t.scheduled,
            paused=name in stopped,
            backfill=progress.get(name) if name in names else None,
            oldest_blocked_age=_age(t.oldest_blocked, now),
            served_by=t.served_by,
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


def work_state(cursor: CursorState, now: datetime) -> WorkState | None:
    """Where a head stands at ``now`` (None: dead-lettered or idle): ``head_state``, with a
    live head neither ready nor leased told apart by whether it ever failed (backing off)
    or waits for a due time (scheduled), as ``consumer_stats`` counts them."""
    d = cursor.dispatch
    if cursor.ready_at is None or d.failed_at is not None:
        return None
    state = head_state(cursor.ready_at, d.claim_holder, now)
    if state == "claimed":
        return "held"
    if state == "backing_off" and d.failure_count == 0:
        return "scheduled"
    return state


def find_heads(sessions: Sessions, query: HeadQuery, *, now: datetime) -> list[FoundHead]:
    """One page of every session's live heads in ``query.state`` matching its filters, in
    claim order (``HeadKey``: ready_at, session id, index, consumer, lane)."""
    found: list[tuple[HeadKey, SessionState, CursorState]] = []
    for session, cursor in _heads(sessions):
        if cursor.ready_at is None or work_state(cursor, now) != query.state:
            continue
        index, lane = cursor.head or 0, cursor.lane or ""
        key = HeadKey(cursor.ready_at, session.session_id, index, cursor.consumer, lane)
        if not _matches(query, key, session, cursor):
            continue
        found.append((key, session, cursor))
    found.sort(key=lambda entry: entry[0])
    return [FoundHead(session.head_of(c), key.ready_at) for key, session, c in found[: query.limit]]


def _matches(query: HeadQuery, key: HeadKey, session: SessionState, cursor: CursorState) -> bool:
    if query.after is not None and key <= query.after:
        return False
    if query.consumer is not None and cursor.consumer != query.consumer:
        return False
    if query.session_prefix is not None and not key.session_id.startswith(query.session_prefix):
        return False
    if query.error is not None and not error_matches(cursor.dispatch.last_error, query.error):
        return False
    if query.event_type is not None:
        row = session.row_at(key.index)
        return row is not None and row.type == query.event_type
    return True
