"""The writes of appends, completions and redrives, gathered as arrays and sent together.

A ``WritePlan`` records, in Python, what one transaction does to the log and cursors
(inserted events, targets, log wakes, finished heads); ``apply`` then queues one
set-based statement per kind of write, in a fixed order, on a pipelined connection:
however many events and completions the transaction holds, the writes cost one
round trip. Indexes were allocated by the caller under the session-row locks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from ..contract.rules import due_at
from ..contract.values import CheckedEvent
from ..ids import IdGenerator
from ..models import Cause, Consumer, StoredEvent
from . import codec
from .queries import Statements

Columns = dict[str, list[Any]]


def columns(*names: str) -> Columns:
    return {name: [] for name in names}


def push(table: Columns, *values: Any) -> None:
    for values_of, value in zip(table.values(), values, strict=True):
        values_of.append(value)


class Executes(Protocol):
    """What ``WritePlan.apply`` uses of a connection: the store's own ``AsyncConnection``,
    or ``caller.py``'s stand-in for an application's connection (never prepared)."""

    async def execute(self, query: bytes, params: dict[str, Any]) -> object: ...


@dataclass(slots=True)
class SessionHead:
    """A locked session as the transaction sees it: its head moves as batches are added."""

    session_id: str
    head: int
    clear_index: int


@dataclass(slots=True)
class WritePlan:
    """What one transaction writes; ``apply`` sends it (see the module docstring)."""

    now: datetime
    new_id: IdGenerator
    sessions: dict[str, SessionHead]
    events: Columns = field(
        default_factory=lambda: columns(
            "session_ids",
            "idxs",
            "event_ids",
            "types",
            "payloads",
            "cause_consumers",
            "cause_lanes",
            "cause_indexes",
            "cause_attempts",
        )
    )
    trace_parents: list[str | None] = field(default_factory=list)
    """``insert_events``' trace contexts, by event of ``events``: filled (with None before)
    up to the last event that has one, empty while none has (the statement pads it)."""
    event_cursors: Columns = field(
        default_factory=lambda: columns("session_ids", "consumers", "keys", "idxs", "dues")
    )
    event_cursor_keys: set[tuple[str, str, str]] = field(default_factory=set)
    """The ``(session_id, consumer, cursor_key)`` of ``event_cursors``."""
    lane_events: Columns = field(
        default_factory=lambda: columns("session_ids", "consumers", "lanes", "idxs", "dues")
    )
    lane_heads: dict[tuple[str, str, str], tuple[int, datetime | None]] = field(
        default_factory=dict
    )
    """Each lane's first event in this plan, with its due time: an idle lane takes it."""
    wakes: dict[tuple[str, str, str], tuple[str, str | None, int]] = field(default_factory=dict)
    refreshes: dict[tuple[str, str, str], str | None] = field(default_factory=dict)
    lane_finishes: Columns = field(
        default_factory=lambda: columns(
            "session_ids", "consumers", "lanes", "idxs", "attempts", "returned"
        )
    )
    advances: Columns = field(
        default_factory=lambda: columns(
            "session_ids", "consumers", "keys", "heads", "record", "attempts", "returned"
        )
    )
    releases: Columns = field(
        default_factory=lambda: columns("session_ids", "consumers", "keys", "idxs")
    )
    moved_heads: set[str] = field(default_factory=set)
    appended: set[str] = field(default_factory=set)
    touched: set[str] = field(default_factory=set)
    """Sessions where this transaction may have made a head claimable (notify_ready looks)."""

    # -- recording ------------------------------------------------------------------------

    def add_batch(
        self,
        session_id: str,
        events: Sequence[CheckedEvent],
        *,
        wake: Sequence[Consumer],
        cause: Cause | None = None,
        ids: Sequence[str] | None = None,
        trace_parent: str | None = None,
    ) -> list[StoredEvent]:
        """Appends a batch at ``head + 1 ...`` and starts its cursor work: targets (event
        cursors, lane queues), then the log consumers of ``wake`` that take one of its
        events. ``cause`` (a completion's) overrides the events' own; ``trace_parent`` is
        the append's trace context, stored with each event."""
        session = self.sessions[session_id]
        base = session.head
        stored: list[StoredEvent] = []
        if trace_parent is not None and events:
            traces = self.trace_parents
            traces.extend([None] * (len(self.events["event_ids"]) - len(traces)))
            traces.extend([trace_parent] * len(events))
        for offset, checked in enumerate(events):
            event = checked.event
            index = base + 1 + offset
            event_id = ids[offset] if ids is not None else event.id or self.new_id()
            event_cause = cause or event.cause
            push(
                self.events,
                session_id,
                index,
                event_id,
                event.type,
                checked.payload_json,
                *(
                    (None, None, None, None)
                    if event_cause is None
                    else (
                        event_cause.consumer,
                        event_cause.lane,
                        event_cause.index,
                        event_cause.attempt,
                    )
                ),
            )
            payload = json.loads(checked.payload_json)
            stored.append(
                StoredEvent(
                    event_id,
                    event.type,
                    payload,
                    index,
                    session_id,
                    self.now,
                    event_cause,
                    trace_parent,
                )
            )
            for target in dict.fromkeys(event.targets):
                self.touched.add(session_id)
                due = due_at(target.not_before, self.now)
                if target.lane is None:
                    key = codec.cursor_key(None, index)
                    push(self.event_cursors, session_id, target.consumer, key, index, due)
                    self.event_cursor_keys.add((session_id, target.consumer, key))
                    continue
                push(self.lane_events, session_id, target.consumer, target.lane, index, due)
                self.lane_heads.setdefault((session_id, target.consumer, target.lane), (index, due))
        session.head = base + len(events)
        if events:
            self.appended.add(session_id)
            self.moved_heads.add(session_id)
        types = [checked.event.type for checked in events]
        for consumer in wake:
            log = consumer.log
            if log is None or not any(log.takes(event_type) for event_type in types):
                continue
            position = session.clear_index if log.backfill else base
            self.wake(session_id, consumer, position)
        return stored

    def wake(self, session_id: str, consumer: Consumer, position: int) -> None:
        """Brings a log consumer's cursor up to date; a missing one opens at ``position``."""
        log = consumer.log
        assert log is not None
        key = (session_id, consumer.name, codec.cursor_key(log.lane, 0))
        first = self.wakes.get(key)
        opening = position if first is None else first[2]
        self.wakes[key] = (log.lane, codec.types_json(log.types), opening)
        self.touched.add(session_id)

    def refresh(self, session_id: str, wake: Iterable[Consumer]) -> None:
        """Records each declared log consumer's types on its existing cursor."""
        for consumer in wake:
            if consumer.log is not None:
                key = (session_id, consumer.name, codec.cursor_key(consumer.log.lane, 0))
                self.refreshes[key] = codec.types_json(consumer.log.types)

    def finish(
        self,
        session_id: str,
        *,
        consumer: str,
        lane: str | None,
        kind: str,
        index: int,
        attempt: int | None,
        ids: Sequence[str] | None,
    ) -> None:
        """Moves a cursor past ``index``: completed by ``attempt`` returning ``ids``, or
        skipped (``attempt`` None). Its snapshot pins go with it."""
        key = codec.cursor_key(lane, index)
        returned = None if ids is None else codec.ids_json(ids)
        if kind == "lane":
            assert lane is not None
            push(self.lane_finishes, session_id, consumer, lane, index, attempt, returned)
        record = kind != "lane" and attempt is not None
        push(self.advances, session_id, consumer, key, index, record, attempt, returned)
        self.release(session_id, consumer, key, index)
        if kind != "event":  # an event cursor goes idle; lanes and logs may take a next head
            self.touched.add(session_id)

    def release(self, session_id: str, consumer: str, key: str, index: int) -> None:
        push(self.releases, session_id, consumer, key, index)

    def creates(self, session_id: str, consumer: str, key: str) -> str | None:
        """The kind of cursor this plan may create at that key (``"event"``, ``"lane"``,
        ``"log"``), or None: what a later completion of the same batch finds there."""
        if key.startswith(codec.LANE_KEY_PREFIX):
            lane = key[len(codec.LANE_KEY_PREFIX) :]
            if (session_id, consumer, lane) in self.lane_heads:
                return "lane"
            return "log" if (session_id, consumer, key) in self.wakes else None
        return "event" if (session_id, consumer, key) in self.event_cursor_keys else None

    # -- sending -------------------------------------------------------------------------

    async def apply(
        self,
        conn: Executes,
        *,
        statements: Statements,
    ) -> None:
        """Queues every write (the caller's pipeline sends them with its commit); the NOTIFY
        of ``touched`` is the transaction's (``Tx.notify_ready``)."""
        now = self.now
        steps: list[tuple[bytes, Columns, dict[str, Any]]] = [
            (statements.query("free_stale_ids"), self._reused_ids(), {}),
            (
                statements.query("insert_events"),
                self.events,
                {"now": now, "trace_parents": self.trace_parents},
            ),
            (statements.query("insert_event_cursors"), self.event_cursors, {"now": now}),
            (statements.query("insert_lane_events"), self.lane_events, {}),
            (statements.query("queue_lane_heads"), self._lane_heads(), {"now": now}),
            (statements.query("refresh_log_types"), self._refreshes(), {}),
            (statements.query("wake_log_cursors"), self._wakes(), {"now": now}),
            (statements.query("finish_lane_events"), self.lane_finishes, {}),
            (statements.query("advance_cursors"), self.advances, {"now": now}),
            (statements.query("release_pins"), self.releases, {}),
        ]
        for statement, table, extra in steps:
            if next(iter(table.values())):
                for params in statements.by_session(statement, {**table, **extra}):
                    await conn.execute(statement, params)
        if self.moved_heads:
            heads = columns("session_ids", "heads")
            for session_id in sorted(self.moved_heads):
                push(heads, session_id, self.sessions[session_id].head)
            statement = statements.query("set_session_heads")
            for params in statements.by_session(statement, heads):
                await conn.execute(statement, params)

    def _reused_ids(self) -> Columns:
        """The new events' ids in sessions that were cleared: old events may hold them."""
        table = columns("session_ids", "event_ids")
        events = self.events
        for session_id, event_id in zip(events["session_ids"], events["event_ids"], strict=True):
            if self.sessions[session_id].clear_index > 0:
                push(table, session_id, event_id)
        return table

    def _lane_heads(self) -> Columns:
        table = columns("session_ids", "consumers", "keys", "lanes", "idxs", "dues")
        for (session_id, consumer, lane), (index, due) in self.lane_heads.items():
            push(table, session_id, consumer, codec.cursor_key(lane, 0), lane, index, due)
        return table

    def _refreshes(self) -> Columns:
        table = columns("session_ids", "consumers", "keys", "types")
        for (session_id, consumer, key), types in self.refreshes.items():
            push(table, session_id, consumer, key, types)
        return table

    def _wakes(self) -> Columns:
        table = columns("session_ids", "consumers", "keys", "lanes", "types", "positions")
        for (session_id, consumer, key), (lane, types, position) in self.wakes.items():
            push(table, session_id, consumer, key, lane, types, position)
        return table
