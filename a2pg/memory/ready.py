"""The readiness queue ``claim_any`` pops: cursors ordered by when their head became claimable."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .state import CursorState, SessionState

COMPACT_MIN = 1024
"""The heap is compacted when it holds more than this, or twice its size after the last
compaction."""

_Entry = tuple[datetime, str, int, str, str, int, "SessionState", "CursorState"]
"""``(ready_at, session id, head, consumer, lane, seq, session, cursor)``."""


class ReadyQueue:
    """A heap of cursors by ``(ready_at, session id, head, consumer, lane)``, shared by all
    sessions of a store (the memory twin of PostgreSQL's ``a2_cursors_ready`` index).

    Entries are never updated in place: each change of a cursor's readiness pushes a
    new entry and stamps the cursor with its sequence number, so older entries (and
    entries of cursors dropped, or of sessions rolled back) are recognised as stale
    when they reach the top, and discarded.
    """

    def __init__(self, sessions: Mapping[str, SessionState]) -> None:
        self._sessions = sessions
        self._heap: list[_Entry] = []
        self._seq = itertools.count(1)
        self._compact_at = COMPACT_MIN

    def set_ready(self, session: SessionState, cursor: CursorState, at: datetime | None) -> None:
        """Records when the cursor's head is claimable (None: idle or dead-lettered)."""
        cursor.ready_at = at
        cursor.ready_seq = next(self._seq)
        if at is not None and cursor.head is not None:
            lane = cursor.lane or ""
            entry = (at, session.session_id, cursor.head, cursor.consumer, lane, cursor.ready_seq)
            heapq.heappush(self._heap, (*entry, session, cursor))
            if len(self._heap) > self._compact_at:
                self._compact()

    def _live(self, entry: _Entry) -> bool:
        session, cursor = entry[6], entry[7]
        return (
            cursor.ready_seq == entry[5]
            and self._sessions.get(session.session_id) is session
            and session.cursors.get(cursor.key) is cursor
        )

    def _compact(self) -> None:
        """Drops stale entries, so a store whose heads are claimed per session (never by
        ``claim_any``) does not pile them up; amortised O(1) per push."""
        self._heap = [entry for entry in self._heap if self._live(entry)]
        heapq.heapify(self._heap)
        self._compact_at = max(COMPACT_MIN, 2 * len(self._heap))

    def requeue(self, session: SessionState) -> None:
        """Re-enters every ready cursor of a session (after it was restored from a copy)."""
        for cursor in session.cursors.values():
            self.set_ready(session, cursor, cursor.ready_at)

    def take(
        self, now: datetime, wanted: Callable[[CursorState], bool], limit: int
    ) -> list[tuple[SessionState, CursorState]]:
        """Removes and returns up to ``limit`` live cursors ready at ``now``, oldest first,
        that ``wanted`` accepts; the caller must change their readiness (claim them).
        Cursors ``wanted`` refuses stay queued."""
        taken: list[tuple[SessionState, CursorState]] = []
        refused: list[_Entry] = []
        while len(taken) < limit and self._heap and self._heap[0][0] <= now:
            entry = heapq.heappop(self._heap)
            if not self._live(entry):
                continue
            if wanted(entry[7]):
                taken.append((entry[6], entry[7]))
            else:
                refused.append(entry)
        for entry in refused:
            heapq.heappush(self._heap, entry)
        return taken

    def next_due(self, now: datetime, wanted: Callable[[CursorState], bool]) -> datetime | None:
        """The soonest readiness after ``now`` among live cursors ``wanted`` accepts (a scan
        of the heap: the reference model's, not a hot path)."""
        due = [
            entry[0]
            for entry in self._heap
            if entry[0] > now and self._live(entry) and wanted(entry[7])
        ]
        return min(due, default=None)
