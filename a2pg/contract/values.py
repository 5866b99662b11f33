"""Checks of single values (texts, names, numbers, JSON, events) that the argument checks of
every operation are built from."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from ..errors import A2Error, invalid
from ..models import (
    CLEAR_EVENT_TYPE,
    JSON,
    AttemptRef,
    ClaimRef,
    Consumer,
    LogSpec,
    NewEvent,
    Target,
)
from .limits import DEFAULT_LIMITS, Limits

REDRIVE_ACTIONS = ("retry", "skip")


def _over(what: str, size: int, setting: str, limit: int) -> A2Error:
    return invalid(f"{what} is {size} long, over the limit Limits.{setting}={limit}")


def check_text(value: object, what: str, *, max_length: int, setting: str) -> str:
    """A non-empty ``str`` without NUL, at most ``max_length`` characters."""
    if not isinstance(value, str):
        raise invalid(f"{what} must be a str, not {type(value).__name__}")
    if not value:
        raise invalid(f"{what} must not be empty")
    if "\x00" in value:
        raise invalid(f"{what} must not contain NUL (\\u0000)")
    if len(value) > max_length:
        raise _over(what, len(value), setting, max_length)
    _check_utf8(value, what)
    return value


def _check_utf8(text: str, what: str) -> None:
    """PostgreSQL stores UTF-8: a lone surrogate (``"\\ud800"``) has no encoding."""
    try:
        text.encode()
    except UnicodeEncodeError:
        raise invalid(f"{what} is not valid Unicode: it holds a lone surrogate") from None


def check_session_id(session_id: object, limits: Limits = DEFAULT_LIMITS) -> str:
    return check_text(
        session_id,
        "session id",
        max_length=limits.max_session_id_length,
        setting="max_session_id_length",
    )


def check_name(value: object, what: str, limits: Limits = DEFAULT_LIMITS) -> str:
    return check_text(value, what, max_length=limits.max_name_length, setting="max_name_length")


def check_lane(lane: object, limits: Limits = DEFAULT_LIMITS) -> str | None:
    return None if lane is None else check_name(lane, "lane name", limits)


def check_index(index: object, what: str = "index") -> int:
    """A positive ``int`` (``bool`` is not an index)."""
    if isinstance(index, bool) or not isinstance(index, int):
        raise invalid(f"{what} must be an int, not {type(index).__name__}")
    if index < 1:
        raise invalid(f"{what} must be at least 1, got {index}")
    return index


def check_optional_bound(value: object, what: str) -> int | None:
    """An optional non-negative ``int`` bound (``after``, ``through``, ``limit``)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(f"{what} must be an int, not {type(value).__name__}")
    if value < 0:
        raise invalid(f"{what} must not be negative, got {value}")
    return value


def check_positive_count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise invalid(f"{what} must be a positive int, got {value!r}")
    return value


def check_seconds(value: object, what: str, *, allow_zero: bool = False) -> float:
    """A finite number of seconds, positive (or zero when allowed)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(f"{what} must be a number of seconds, not {type(value).__name__}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        raise invalid(f"{what} must be a positive, finite number of seconds, got {value!r}")
    return seconds


def check_datetime(value: object, what: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise invalid(f"{what} must be an aware datetime")
    return value


def check_json(value: object, what: str, limits: Limits = DEFAULT_LIMITS) -> str:
    """Checks that ``value`` is plain JSON PostgreSQL can store; returns its JSON text.

    Walks the value rather than trusting ``json.dumps`` because dumps silently turns
    tuples' siblings like int dict keys into strings and cannot tell a NUL in a str
    apart from the six characters ``\\u0000``.
    """
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limits.max_json_depth:
            raise invalid(
                f"{what} nests deeper than the limit Limits.max_json_depth={limits.max_json_depth}"
            )
        if item is None or isinstance(item, bool | int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise invalid(f"{what} is not JSON: {item!r} has no JSON form")
            continue
        if isinstance(item, str):
            if "\x00" in item:
                raise invalid(f"{what} holds NUL (\\u0000), which PostgreSQL cannot store")
            continue
        if isinstance(item, list | tuple):
            stack.extend((child, depth + 1) for child in item)
            continue
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise invalid(f"{what} is not JSON: object key {key!r} is not a str")
                if "\x00" in key:
                    raise invalid(f"{what} holds NUL (\\u0000), which PostgreSQL cannot store")
                stack.append((child, depth + 1))
            continue
        raise invalid(f"{what} is not JSON: {type(item).__name__} has no JSON form")
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (ValueError, TypeError, RecursionError) as exc:  # cycles, or too deep for json
        raise invalid(f"{what} is not JSON: {exc}") from None
    _check_utf8(text, what)
    return text


def check_payload(payload: JSON, limits: Limits = DEFAULT_LIMITS) -> str:
    text = check_json(payload, "event payload", limits)
    size = len(text.encode())
    if size > limits.max_payload_bytes:
        raise invalid(
            f"event payload is {size} bytes, over the limit "
            f"Limits.max_payload_bytes={limits.max_payload_bytes}"
        )
    return text


def check_attempt_ref(ref: object, what: str, limits: Limits = DEFAULT_LIMITS) -> AttemptRef:
    if not isinstance(ref, AttemptRef):
        raise invalid(f"{what} must be an AttemptRef, not {type(ref).__name__}")
    check_name(ref.consumer, f"{what} consumer name", limits)
    check_lane(ref.lane, limits)
    check_index(ref.index, f"{what} index")
    check_index(ref.attempt, f"{what} attempt")
    return ref


def check_claim_ref(ref: object, what: str, limits: Limits = DEFAULT_LIMITS) -> ClaimRef:
    if not isinstance(ref, ClaimRef):
        raise invalid(f"{what} must be a ClaimRef, not {type(ref).__name__}")
    check_name(ref.consumer, f"{what} consumer name", limits)
    check_lane(ref.lane, limits)
    check_index(ref.index, f"{what} index")
    return ref


def check_consumers(consumers: object, limits: Limits = DEFAULT_LIMITS) -> list[Consumer] | None:
    """A list of distinct consumers with valid specs, or None (serve every consumer)."""
    if consumers is None:
        return None
    if isinstance(consumers, str | bytes | Mapping) or not isinstance(consumers, Iterable):
        raise invalid("consumers must be a sequence of Consumer")
    checked: list[Consumer] = []
    seen: set[str] = set()
    for consumer in consumers:
        if not isinstance(consumer, Consumer):
            raise invalid(f"consumers must hold Consumer, not {type(consumer).__name__}")
        check_name(consumer.name, "consumer name", limits)
        if consumer.name in seen:
            raise invalid(f"consumer '{consumer.name}' is declared twice")
        seen.add(consumer.name)
        if consumer.log is not None:
            check_log_spec(consumer.log, limits)
        checked.append(consumer)
    return checked


def check_log_spec(log: object, limits: Limits = DEFAULT_LIMITS) -> LogSpec:
    if not isinstance(log, LogSpec):
        raise invalid(f"a consumer's log must be a LogSpec, not {type(log).__name__}")
    check_name(log.lane, "log lane name", limits)
    if log.types is not None:
        if isinstance(log.types, str) or not isinstance(log.types, tuple | list):
            raise invalid("LogSpec.types must be a tuple of event types or None")
        for event_type in log.types:
            check_text(
                event_type,
                "log event type",
                max_length=limits.max_type_length,
                setting="max_type_length",
            )
    if not isinstance(log.backfill, bool):
        raise invalid("LogSpec.backfill must be a bool")
    return log


def log_consumer_names(consumers: Sequence[Consumer] | None) -> frozenset[str]:
    return frozenset(c.name for c in consumers or () if c.log is not None)


@dataclass(frozen=True, slots=True)
class CheckedEvent:
    """A ``NewEvent`` that passed validation, with its payload already encoded."""

    event: NewEvent
    payload_json: str


def check_events(
    events: object,
    limits: Limits = DEFAULT_LIMITS,
    *,
    need_ids: bool = False,
) -> list[CheckedEvent]:
    """Checks a batch to append (``need_ids``: every event needs an id)."""
    if isinstance(events, str | bytes | Mapping) or not isinstance(events, Iterable):
        raise invalid("events must be a sequence of NewEvent")
    batch = list(events)
    if len(batch) > limits.max_batch_events:
        raise invalid(
            f"batch holds {len(batch)} events, over the limit "
            f"Limits.max_batch_events={limits.max_batch_events}"
        )
    checked: list[CheckedEvent] = []
    for position, event in enumerate(batch):
        if not isinstance(event, NewEvent):
            raise invalid(f"events[{position}] must be a NewEvent, not {type(event).__name__}")
        check_text(
            event.type, "event type", max_length=limits.max_type_length, setting="max_type_length"
        )
        if event.type == CLEAR_EVENT_TYPE:
            raise invalid(
                f"event type '{CLEAR_EVENT_TYPE}' is reserved for clear markers: call clear()"
            )
        if event.id is not None:
            check_text(
                event.id, "event id", max_length=limits.max_id_length, setting="max_id_length"
            )
        elif need_ids:
            raise invalid(f"events[{position}] needs an id: a completion's id is its retry key")
        if event.cause is not None:
            check_attempt_ref(event.cause, "event cause", limits)
        if isinstance(event.targets, str | bytes) or not isinstance(event.targets, Iterable):
            raise invalid("event targets must be a sequence of Target")
        for target in event.targets:
            if not isinstance(target, Target):
                raise invalid(f"event targets must hold Target, not {type(target).__name__}")
            check_name(target.consumer, "target consumer name", limits)
            check_lane(target.lane, limits)
        checked.append(CheckedEvent(event, check_payload(event.payload, limits)))
    return checked


def check_error_text(error: object, limits: Limits = DEFAULT_LIMITS) -> str:
    """A failure's error text; never refused for its content: long tracebacks are cut to
    the limit, NUL and lone surrogates (which PostgreSQL cannot store) are escaped."""
    if not isinstance(error, str):
        raise invalid(f"error must be a str, not {type(error).__name__}")
    text = error.replace("\x00", "\\u0000")
    text = text.encode("utf-8", "backslashreplace").decode()
    return text[: limits.max_error_length]


def check_redrive_action(action: object) -> str:
    if action not in REDRIVE_ACTIONS:
        raise invalid(f"redrive action must be 'retry' or 'skip', got {action!r}")
    assert isinstance(action, str)
    return action


def check_holder(holder: object, limits: Limits = DEFAULT_LIMITS) -> str:
    return check_name(holder, "claim holder", limits)
