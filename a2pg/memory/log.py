"""The session log: inserting batches, ownership of ids, and idempotent replays."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime

from ..errors import A2Error
from ..models import Cause, Consumer, StoredEvent
from ..validation import CheckedEvent, same_json
from .cursors import enqueue
from .state import Row, SessionState


def batch_owners(session: SessionState | None, events: Sequence[CheckedEvent]) -> list[Row]:
    """The live rows owning a batch's supplied ids; an id twice in the batch is refused."""
    supplied = [checked.event.id for checked in events if checked.event.id is not None]
    if len(set(supplied)) != len(supplied):
        raise A2Error("PARTIAL_DUPLICATE_BATCH", "batch contains the same event id more than once")
    if session is None:
        return []
    return [row for event_id in supplied if (row := session.owner_of(event_id)) is not None]


def replay(events: Sequence[CheckedEvent], rows: Sequence[Row]) -> list[StoredEvent]:
    """The stored events of an idempotent replay, in request order; a differing type or
    payload under the same id is an ``IDEMPOTENCY_CONFLICT``."""
    by_id = {row.id: row for row in rows}
    stored = []
    for checked in events:
        row = by_id[checked.event.id or ""]
        same_payload = same_json(json.loads(row.payload_json), json.loads(checked.payload_json))
        if row.type != checked.event.type or not same_payload:
            raise A2Error(
                "IDEMPOTENCY_CONFLICT",
                f"event id '{row.id}' is stored at index {row.index} with another type or payload",
            )
        stored.append(row.stored())
    return stored


def plan_rows(
    session: SessionState,
    events: Sequence[CheckedEvent],
    *,
    now: datetime,
    new_id: Callable[[], str],
    cause: Cause | None = None,
) -> list[Row]:
    """The rows a batch becomes at ``head + 1 ...``, with one ``created_at``; writes nothing.

    Missing ids are generated; a generated id that collides with a live one (or one
    of the batch) refuses the batch. ``cause`` (a completion's) overrides the events'.
    """
    base = session.head
    rows: list[Row] = []
    taken: set[str] = set()
    for offset, checked in enumerate(events):
        event = checked.event
        event_id = event.id if event.id is not None else new_id()
        if event_id in taken or session.owner_of(event_id) is not None:
            raise A2Error("PARTIAL_DUPLICATE_BATCH", f"event id '{event_id}' already exists")
        taken.add(event_id)
        index = base + 1 + offset
        rows.append(
            Row(
                event_id,
                event.type,
                checked.payload_json,
                index,
                session.session_id,
                now,
                cause or event.cause,
            )
        )
    return rows


def add_rows(
    session: SessionState,
    rows: Sequence[Row],
    events: Sequence[CheckedEvent],
    *,
    wake: Sequence[Consumer],
    now: datetime,
) -> None:
    """Writes planned rows (the session must be registered in the store by now, so the
    readiness queue sees its cursors as live) and starts their cursor work."""
    base = session.head
    session.rows.extend(rows)
    session.by_id.update((row.id, row) for row in rows)
    session.new_events = True
    enqueue(session, rows, [checked.event for checked in events], base, wake, now)


def insert(
    session: SessionState,
    events: Sequence[CheckedEvent],
    *,
    now: datetime,
    new_id: Callable[[], str],
    wake: Sequence[Consumer],
    cause: Cause | None = None,
) -> list[Row]:
    """Plans and writes a batch in a registered session."""
    rows = plan_rows(session, events, now=now, new_id=new_id, cause=cause)
    add_rows(session, rows, events, wake=wake, now=now)
    return rows
