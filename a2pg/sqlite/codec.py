"""SQLite rows (``sqlite3.Row``) to the contract's value types, and values to their columns.

Times are integer microseconds since the epoch, UTC: exact for every ``datetime`` the
contract admits (as PostgreSQL's timestamptz is). Payloads, states, log types and
returned ids are JSON text, decoded with ``json.loads`` as MemoryStore decodes its
own, so numbers such as ``1e300`` and integers past 2**53 come back as they were
written. A cause is the seed's JSON object ``{"consumer", "lane", "index", "attempt"}``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from ..models import AttemptRef, Cause, Consumer, Cursor, Dispatch, Head, LogSpec, StoredEvent

Row = sqlite3.Row

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)

EVENT_KEY_PREFIX = "#"
LANE_KEY_PREFIX = "L"


def cursor_key(lane: str | None, index: int) -> str:
    """The seed's cursor keys: one event cursor per event (``#<index>``), one lane or log
    cursor per lane (``L<lane>``); a consumer is targeted or a log consumer, never both."""
    return f"{EVENT_KEY_PREFIX}{index}" if lane is None else f"{LANE_KEY_PREFIX}{lane}"


def micros(value: datetime) -> int:
    """An aware datetime as integer microseconds since the epoch (exact)."""
    return (value - EPOCH) // MICROSECOND


def maybe_micros(value: datetime | None) -> int | None:
    return None if value is None else micros(value)


def time_of(value: int) -> datetime:
    return EPOCH + timedelta(microseconds=value)


def maybe_time(value: int | None) -> datetime | None:
    return None if value is None else time_of(value)


def types_json(types: Sequence[str] | None) -> str | None:
    """A log spec's types as the seed stores them: a JSON array, or NULL for every type."""
    return None if types is None else json.dumps(list(types))


def types_of(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(json.loads(text))


def ids_json(ids: Sequence[str]) -> str:
    return json.dumps(list(ids))


def ids_of(text: str | None) -> tuple[str, ...]:
    return () if text is None else tuple(json.loads(text))


def names_json(consumers: Sequence[Consumer] | None) -> str | None:
    """The consumers a call serves, as a JSON array of names; NULL serves every consumer."""
    return None if consumers is None else json.dumps([consumer.name for consumer in consumers])


def cause_json(cause: Cause | None) -> str | None:
    if cause is None:
        return None
    return json.dumps(
        {
            "consumer": cause.consumer,
            "lane": cause.lane,
            "index": cause.index,
            "attempt": cause.attempt,
        }
    )


def cause_of(text: str | None) -> Cause | None:
    if text is None:
        return None
    value = json.loads(text)
    return AttemptRef(value["consumer"], value["lane"], int(value["index"]), int(value["attempt"]))


def event(row: Row, prefix: str = "") -> StoredEvent:
    """An ``a2_events`` row; with ``prefix`` ``e_``, a head row's event columns."""
    return StoredEvent(
        row[f"{prefix}event_id"],
        row[f"{prefix}event_type"],
        json.loads(row[f"{prefix}payload"]),
        int(row[f"{prefix}idx"]),
        row["session_id"],
        time_of(row[f"{prefix}created_at"]),
        cause_of(row[f"{prefix}cause"]),
        row[f"{prefix}trace_parent"],
    )


def dispatch(row: Row) -> Dispatch:
    return Dispatch(
        attempt_count=int(row["attempt_count"]),
        first_claimed_at=maybe_time(row["first_claimed_at"]),
        last_claimed_at=maybe_time(row["last_claimed_at"]),
        last_ready_at=maybe_time(row["last_ready_at"]),
        claim_holder=row["claim_holder"],
        claim_expires_at=maybe_time(row["claim_expires_at"]),
        failure_count=int(row["failure_count"]),
        last_failed_at=maybe_time(row["last_failed_at"]),
        last_failed_attempt=row["last_failed_attempt"],
        last_error=row["last_error"],
        failed_at=maybe_time(row["failed_at"]),
    )


def cursor(row: Row) -> Cursor:
    return Cursor(
        row["consumer"], row["lane"], row["kind"], int(row["position"]), row["head"], dispatch(row)
    )


def head(row: Row) -> Head:
    """A cursor row joined with its head event (``e_`` columns) and its session's clear
    index (``clear_index``)."""
    clear_index = int(row["clear_index"] or 0)
    return Head(event(row, "e_"), row["consumer"], row["lane"], dispatch(row), clear_index or None)


def consumer(row: Row) -> Consumer:
    spec = LogSpec(row["lane"], types_of(row["types"]), bool(row["backfill"]))
    return Consumer(row["name"], spec)
