"""State snapshots in memory: read_state, put_snapshots, and each session's cache of folds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..contract.args import PutSnapshotsArgs, ReadStateArgs
from ..contract.rules import refuse_snapshots_past_head
from ..models import ClaimRef, StateRead

if TYPE_CHECKING:
    from .state import SessionState

Checkpoint = tuple[str, int]
"""``(reducer, index)``: one cached fold."""


@dataclass(slots=True)
class SnapshotCache:
    """Per reducer, the newest fold (``heads``) and older folds pins keep (``history``).

    A pin ties an unfinished head (``ClaimRef``) to a checkpoint, so a retried attempt
    reads the state its first attempt read. History exists only while pinned: when
    the last pin of a checkpoint goes, so does its history entry (a head snapshot
    stays, as the newest fold).
    """

    heads: dict[str, tuple[int, str]] = field(default_factory=dict)
    history: dict[Checkpoint, str] = field(default_factory=dict)
    pins: dict[ClaimRef, set[Checkpoint]] = field(default_factory=dict)
    pinned_by: dict[Checkpoint, set[ClaimRef]] = field(default_factory=dict)

    def put(self, reducer: str, index: int, state_json: str, pins: Sequence[ClaimRef]) -> None:
        """Stores one write (callers pass writes by index, at or above the clear index, with
        only the pins of live heads).

        The newest write becomes the head snapshot; the head it replaces moves to
        history if pinned. A write older than the head is kept only if pinned.
        """
        checkpoint = (reducer, index)
        for pin in pins:
            self.pins.setdefault(pin, set()).add(checkpoint)
            self.pinned_by.setdefault(checkpoint, set()).add(pin)
        head = self.heads.get(reducer)
        if head is None or index >= head[0]:
            if head is not None and index > head[0] and (reducer, head[0]) in self.pinned_by:
                self.history[(reducer, head[0])] = head[1]
            self.heads[reducer] = (index, state_json)
        elif checkpoint in self.pinned_by:
            self.history[checkpoint] = state_json

    def newest(self, reducer: str, through: int, clear_index: int) -> tuple[int, str] | None:
        """The newest fold with ``clear_index <= index <= through``, head or history."""
        found: tuple[int, str] | None = None
        head = self.heads.get(reducer)
        if head is not None and clear_index <= head[0] <= through:
            found = head
        for (name, index), state_json in self.history.items():
            newer = found is None or index > found[0]
            if name == reducer and clear_index <= index <= through and newer:
                found = (index, state_json)
        return found

    def release(self, ref: ClaimRef) -> None:
        """A head finished, was skipped, dead-lettered or cleared: drop its pins and the
        history no other pin keeps."""
        for checkpoint in self.pins.pop(ref, ()):
            holders = self.pinned_by[checkpoint]
            holders.discard(ref)
            if not holders:
                del self.pinned_by[checkpoint]
                self.history.pop(checkpoint, None)

    def release_all(self) -> None:
        """A clear: every pin goes, and with them all history."""
        self.pins.clear()
        self.pinned_by.clear()
        self.history.clear()

    def drop_below(self, clear_index: int) -> None:
        """Reclaim is done: folds below the clear marker can never be read again."""
        self.heads = {name: head for name, head in self.heads.items() if head[0] >= clear_index}
        self.history = {cp: state for cp, state in self.history.items() if cp[1] >= clear_index}

    def copy(self) -> SnapshotCache:
        return SnapshotCache(
            dict(self.heads),
            dict(self.history),
            {ref: set(cps) for ref, cps in self.pins.items()},
            {cp: set(refs) for cp, refs in self.pinned_by.items()},
        )


def read_state(session: SessionState | None, args: ReadStateArgs) -> StateRead:
    """The newest usable fold at or below ``through`` (default and cap: the head) and the
    events after it, never below the clear marker."""
    if session is None:
        return StateRead(0, None, [], 0, 0)
    upto = session.head if args.through is None else min(args.through, session.head)
    found = session.snapshots.newest(args.reducer, upto, session.clear_index)
    index, state = (0, None) if found is None else (found[0], json.loads(found[1]))
    events = [row.stored() for row in session.rows_between(index, upto)]
    return StateRead(index, state, events, session.head, session.clear_index)


def put_snapshots(session: SessionState | None, args: PutSnapshotsArgs) -> None:
    """Caches folds; writes below the clear index are ignored, a write past the session
    head is ``INVALID_ARGUMENT`` (and writes nothing), pins of heads not live are ignored."""
    head = 0 if session is None else session.head
    refuse_snapshots_past_head([write.index for write in args.writes], head, args.session_id)
    if session is None:  # no write can name an index of an empty session
        return
    for write in sorted(args.writes, key=lambda write: write.index):
        if write.index >= session.clear_index:
            pins = [pin for pin in write.pins if _live_head(session, pin)]
            session.snapshots.put(args.reducer, write.index, write.state_json, pins)


def _live_head(session: SessionState, pin: ClaimRef) -> bool:
    cursor = session.cursor_of(pin)
    return cursor is not None and cursor.head == pin.index and cursor.dispatch.failed_at is None
