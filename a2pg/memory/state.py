"""The records MemoryStore keeps: its sessions, and per session event rows, cursors and caches."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from ..contract.rules import CompletedAttempt
from ..models import (
    AttemptRecord,
    AttemptRef,
    Cause,
    ClaimRef,
    Cursor,
    CursorKind,
    Dispatch,
    Head,
    StoredEvent,
)
from .ready import ReadyQueue
from .snapshots import SnapshotCache

CursorKey = tuple[str, str | None, int]
"""``(consumer, lane, index)`` for event cursors, ``(consumer, lane, 0)`` for lane and log ones."""

FRESH = Dispatch()
"""The bookkeeping of a head nobody has claimed yet."""


def cursor_key(consumer: str, lane: str | None, index: int) -> CursorKey:
    """Event cursors are one per event; lane and log cursors one per ``(consumer, lane)``."""
    return (consumer, lane, index if lane is None else 0)


@dataclass(frozen=True, slots=True)
class Row:
    """One stored event; the payload is kept as JSON text so nobody can mutate it."""

    id: str
    type: str
    payload_json: str
    index: int
    session_id: str
    created_at: datetime
    cause: Cause | None
    trace_parent: str | None = None

    def stored(self) -> StoredEvent:
        """A fresh ``StoredEvent``: every call decodes its own copy of the payload."""
        payload = json.loads(self.payload_json)
        return StoredEvent(
            self.id,
            self.type,
            payload,
            self.index,
            self.session_id,
            self.created_at,
            self.cause,
            self.trace_parent,
        )


@dataclass(slots=True)
class CursorState:
    """A cursor as stored. ``ready_at`` is when its head became claimable (None when idle or
    dead-lettered); ``queue`` holds a lane cursor's unfinished indexes, head first;
    ``completions`` a lane cursor's finished heads, or a log cursor's last completion."""

    consumer: str
    lane: str | None
    kind: CursorKind
    position: int
    head: int | None = None
    ready_at: datetime | None = None
    ready_seq: int = 0
    dispatch: Dispatch = FRESH
    types: tuple[str, ...] | None = None
    queue: deque[int] = field(default_factory=deque)
    due: dict[int, datetime] = field(default_factory=dict)
    """A lane's queued indexes held back until a time (``Target.not_before``)."""
    completions: dict[int, CompletedAttempt] = field(default_factory=dict)

    @property
    def key(self) -> CursorKey:
        return cursor_key(self.consumer, self.lane, self.head or 0)

    def copy(self) -> CursorState:
        return replace(
            self, queue=deque(self.queue), due=dict(self.due), completions=dict(self.completions)
        )

    def view(self) -> Cursor:
        return Cursor(self.consumer, self.lane, self.kind, self.position, self.head, self.dispatch)


@dataclass(slots=True)
class SessionState:
    """One session: its log (``rows`` after ``offset`` reclaimed ones), cursors and caches.

    ``finished`` records finished event cursors (which are dropped from ``cursors`` so
    scans only see live work); ``ready`` is the store-wide readiness queue (copies
    share it); ``new_events``/``new_work`` say what to announce once the operation
    is done.
    """

    session_id: str
    ready: ReadyQueue
    rows: list[Row] = field(default_factory=list)
    offset: int = 0
    clear_index: int = 0
    by_id: dict[str, Row] = field(default_factory=dict)
    cursors: dict[CursorKey, CursorState] = field(default_factory=dict)
    finished: dict[CursorKey, CompletedAttempt] = field(default_factory=dict)
    snapshots: SnapshotCache = field(default_factory=SnapshotCache)
    attempts: dict[tuple[str, str | None, int, int], AttemptRecord] = field(default_factory=dict)
    """The attempt history: finished attempts by (consumer, lane, index, attempt)."""
    new_events: bool = False
    new_work: bool = False

    @property
    def head(self) -> int:
        return self.offset + len(self.rows)

    def row_at(self, index: int) -> Row | None:
        return self.rows[index - self.offset - 1] if self.offset < index <= self.head else None

    def owner_of(self, event_id: str) -> Row | None:
        """The live row holding ``event_id``; ids below the clear marker are free again."""
        row = self.by_id.get(event_id)
        return row if row is not None and row.index >= self.clear_index else None

    def owners(self, ids: Sequence[str]) -> list[StoredEvent]:
        """The live events holding any of ``ids``, in the order of ``ids``."""
        return [row.stored() for event_id in ids if (row := self.owner_of(event_id)) is not None]

    def cursor_of(self, ref: ClaimRef | AttemptRef) -> CursorState | None:
        """The cursor whose head ``ref`` names, if that cursor exists (its head may differ)."""
        return self.cursors.get(cursor_key(ref.consumer, ref.lane, ref.index))

    def view_of(self, ref: ClaimRef | AttemptRef) -> Cursor | None:
        cursor = self.cursor_of(ref)
        return None if cursor is None else cursor.view()

    def rows_between(
        self, after: int, through: int, limit: int | None = None, *, visible: bool = True
    ) -> list[Row]:
        """Rows with ``after < index <= through`` (at most ``limit``): never below the clear
        marker when ``visible``, else whatever has not been reclaimed."""
        start = max(after, self.clear_index - 1 if visible else 0, self.offset)
        end = min(through, self.head) if limit is None else min(through, self.head, start + limit)
        return self.rows[start - self.offset : max(start, end) - self.offset]

    def set_ready(self, cursor: CursorState, at: datetime | None) -> None:
        self.ready.set_ready(self, cursor, at)

    def head_of(self, cursor: CursorState) -> Head:
        row = self.row_at(cursor.head or 0)
        assert row is not None, "a cursor's head is always a stored event"
        return Head(
            row.stored(), cursor.consumer, cursor.lane, cursor.dispatch, self.clear_index or None
        )

    def copy(self) -> SessionState:
        """A copy to roll back to: rows are immutable, so only containers are copied."""
        return replace(
            self,
            rows=list(self.rows),
            by_id=dict(self.by_id),
            cursors={key: cursor.copy() for key, cursor in self.cursors.items()},
            finished=dict(self.finished),
            snapshots=self.snapshots.copy(),
            attempts=dict(self.attempts),
        )


class Sessions:
    """Every session of one store, and the readiness queue they share."""

    def __init__(self) -> None:
        self.by_id: dict[str, SessionState] = {}
        self.ready = ReadyQueue(self.by_id)

    def get(self, session_id: str) -> SessionState | None:
        return self.by_id.get(session_id)

    def writable(self, session_id: str) -> SessionState:
        """The session to write to. A new one is stored by ``keep`` only once its write can
        no longer fail, and before its first row is added (so the readiness queue sees its
        cursors as live)."""
        return self.by_id.get(session_id) or SessionState(session_id, self.ready)

    def keep(self, session: SessionState) -> None:
        self.by_id[session.session_id] = session

    def restore(self, copies: Mapping[str, SessionState]) -> None:
        """Puts back copies taken before a write that failed part-way."""
        self.by_id.update(copies)
        for session in copies.values():
            self.ready.requeue(session)
