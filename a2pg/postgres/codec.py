"""Rows of the PostgreSQL store (as dicts) to the contract's value types, and back to keys."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from json.encoder import encode_basestring
from typing import Any

from ..models import (
    AttemptRef,
    Cause,
    Consumer,
    Cursor,
    Dispatch,
    Head,
    LogSpec,
    StoredEvent,
)

Row = Mapping[str, Any]

EVENT_KEY_PREFIX = "#"
LANE_KEY_PREFIX = "L"


def cursor_key(lane: str | None, index: int) -> str:
    """The cursor a head lives on: one per event (``#<index>``), one per lane (``L<lane>``).

    Log cursors share the lane form: a consumer is either targeted or a log
    consumer, so the two never meet.
    """
    return f"{EVENT_KEY_PREFIX}{index}" if lane is None else f"{LANE_KEY_PREFIX}{lane}"


def utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def maybe_utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def quoted(text: str) -> str:
    """``text`` as a JSON string, for the JSON documents the one-statement writes take."""
    return encode_basestring(text)


def types_json(types: Sequence[str] | None) -> str | None:
    """A log spec's types as one JSON text, so arrays of them travel in one ``text[]``."""
    return None if types is None else json.dumps(list(types))


def ids_json(ids: Sequence[str]) -> str:
    return json.dumps(list(ids))


def cause_of(row: Row, prefix: str = "") -> Cause | None:
    index = row[f"{prefix}cause_index"]
    if index is None:
        return None
    return AttemptRef(
        row[f"{prefix}cause_consumer"],
        row[f"{prefix}cause_lane"],
        int(index),
        int(row[f"{prefix}cause_attempt"]),
    )


def event(row: Row) -> StoredEvent:
    """An ``a2_events`` row (columns as in ``read_events``)."""
    return StoredEvent(
        row["event_id"],
        row["event_type"],
        row["payload"],
        int(row["idx"]),
        row["session_id"],
        utc(row["created_at"]),
        cause_of(row),
        row["trace_parent"],
    )


def dispatch(row: Row) -> Dispatch:
    last_failed_attempt = row["last_failed_attempt"]
    return Dispatch(
        attempt_count=int(row["attempt_count"]),
        first_claimed_at=maybe_utc(row["first_claimed_at"]),
        last_claimed_at=maybe_utc(row["last_claimed_at"]),
        last_ready_at=maybe_utc(row["last_ready_at"]),
        claim_holder=row["claim_holder"],
        claim_expires_at=maybe_utc(row["claim_expires_at"]),
        failure_count=int(row["failure_count"]),
        last_failed_at=maybe_utc(row["last_failed_at"]),
        last_failed_attempt=None if last_failed_attempt is None else int(last_failed_attempt),
        last_error=row["last_error"],
        failed_at=maybe_utc(row["failed_at"]),
    )


def cursor(row: Row) -> Cursor:
    head = row["head"]
    return Cursor(
        row["consumer"],
        row["lane"],
        row["kind"],
        int(row["position"]),
        None if head is None else int(head),
        dispatch(row),
    )


def head(row: Row) -> Head:
    """A cursor row joined with its head event (``e_`` columns) and the session's clear index."""
    stored = StoredEvent(
        row["e_event_id"],
        row["e_event_type"],
        row["e_payload"],
        int(row["head"]),
        row["session_id"],
        utc(row["e_created_at"]),
        cause_of(row, "e_"),
        row["e_trace_parent"],
    )
    clear_index = int(row["clear_index"] or 0)
    return Head(stored, row["consumer"], row["lane"], dispatch(row), clear_index or None)


def consumer(row: Row) -> Consumer:
    types = row["types"]
    spec = LogSpec(row["lane"], None if types is None else tuple(types), bool(row["backfill"]))
    return Consumer(row["name"], spec)
