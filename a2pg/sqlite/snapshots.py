"""State snapshots on SQLite: the newest usable fold, and pins that keep history.

``put_snapshots`` applies MemoryStore's rules (``a2pg.memory.snapshots``) write by
write: the newest write becomes the head snapshot; the head it replaces moves to
history if pinned; a write older than the head is kept only if pinned.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from ..contract.args import PutSnapshotsArgs, ReadStateArgs
from ..contract.rules import refuse_snapshots_past_head
from ..models import ClaimRef, StateRead
from . import codec
from .cursors import select_cursor
from .database import SessionHead, Tx, one, session_head
from .log import events_after


def read_state(conn: sqlite3.Connection, args: ReadStateArgs) -> StateRead:
    """The newest usable fold at or below ``through`` (default and cap: the head) and the
    events after it, never below the clear marker (run in one read transaction)."""
    session = session_head(conn, args.session_id)
    if not session.exists:
        return StateRead(0, None, [], 0, 0)
    upto = session.head if args.through is None else min(args.through, session.head)
    params = {
        "session_id": args.session_id,
        "reducer": args.reducer,
        "clear_index": session.clear_index,
        "upto": upto,
    }
    found = one(conn, "newest_snapshot", params)
    index, state = (0, None) if found is None else (int(found[0]), json.loads(found[1]))
    events = events_after(
        conn, args.session_id, after=max(index, session.clear_index - 1), through=upto
    )
    return StateRead(index, state, events, session.head, session.clear_index)


def put_snapshots(tx: Tx, args: PutSnapshotsArgs) -> None:
    """Caches folds; writes below the clear index are ignored, a write past the session
    head is ``INVALID_ARGUMENT`` (and writes nothing), pins of heads not live are ignored."""
    session = tx.session(args.session_id)
    refuse_snapshots_past_head(
        [write.index for write in args.writes], session.head, args.session_id
    )
    if not session.exists:
        return
    base = {"session_id": args.session_id, "reducer": args.reducer}
    for write in sorted(args.writes, key=lambda write: write.index):
        if write.index >= session.clear_index:
            _pin(tx, session, base, write.index, write.pins)
            _put(tx, base, write.index, write.state_json)


def _pin(
    tx: Tx, session: SessionHead, base: dict[str, str], up_to: int, pins: Sequence[ClaimRef]
) -> None:
    """Ties the write at ``up_to`` to each live head it pins (pins of others are ignored)."""
    for pin in pins:
        if _live_head(tx, session, pin):
            key = codec.cursor_key(pin.lane, pin.index)
            ref = {"consumer": pin.consumer, "cursor_key": key, "idx": pin.index}
            tx.run("insert_pin", {**base, **ref, "up_to": up_to})


def _put(tx: Tx, base: dict[str, str], index: int, state_json: str) -> None:
    """The newest write becomes the head snapshot, the head it replaces moving to history
    if pinned; an older write goes to history only if pinned."""
    head = tx.one("snapshot_head", base)
    stored = None if head is None else int(head["up_to_index"])
    if head is None or stored is None or index >= stored:
        if head is not None and stored is not None and index > stored and _pinned(tx, base, stored):
            archived = {"state": head["state"], "updated_at": head["updated_at"]}
            tx.run("put_history", {**base, "up_to": stored, **archived})
        tx.run("put_snapshot_head", {**base, "up_to": index, "state": state_json, "now": tx.now_us})
    elif _pinned(tx, base, index):
        tx.run(
            "put_history", {**base, "up_to": index, "state": state_json, "updated_at": tx.now_us}
        )


def _pinned(tx: Tx, base: dict[str, str], up_to: int) -> bool:
    row = tx.one("is_pinned", {**base, "up_to": up_to})
    return bool(row and row["pinned"])


def _live_head(tx: Tx, session: SessionHead, pin: ClaimRef) -> bool:
    """Whether a pin names a live head: its cursor is at that index and not dead."""
    if pin.index <= session.clear_index:
        return False
    row = select_cursor(
        tx.conn, session.session_id, pin.consumer, codec.cursor_key(pin.lane, pin.index)
    )
    return row is not None and row["head"] == pin.index and row["failed_at"] is None
