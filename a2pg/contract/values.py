"""Checks of JSON values and of the contract's model values (refs, consumers, log specs,
events) that the argument checks of every operation are built from; each returns the
value normalised (lists as tuples, times in UTC) so backends store what was checked."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import invalid
from ..models import (
    CLEAR_EVENT_TYPE,
    AttemptRef,
    ClaimRef,
    Consumer,
    LogSpec,
    NewEvent,
    Target,
)
from .budget import CallBudget
from .limits import DEFAULT_LIMITS, Limits
from .render import show, type_name
from .scalars import (
    check_attempt,
    check_event_id,
    check_event_type,
    check_index,
    check_lane,
    check_name,
    items,
    utf8_size,
)

# -- JSON -----------------------------------------------------------------------------


def encode_json(
    value: object, what: str, limits: Limits, *, max_bytes: int, setting: str
) -> tuple[str, int]:
    """Checks that ``value`` is plain JSON PostgreSQL can store within ``max_bytes``;
    returns its compact JSON text and its size in UTF-8 bytes.

    Walks the value first rather than trusting ``json.dumps``, which turns int keys
    into strings and cannot tell a NUL apart from the text ``\\u0000``. The walk tallies
    a lower bound of the encoded size and stops once it passes ``max_bytes``, so a huge
    or cyclic value costs at most that much work.
    """
    too_big = invalid(f"{what} is over the limit Limits.{setting}={max_bytes} bytes")
    floor = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limits.max_json_depth:
            raise invalid(
                f"{what} nests deeper than the limit Limits.max_json_depth={limits.max_json_depth}"
            )
        if item is None or isinstance(item, bool):
            floor += 4
        elif isinstance(item, int):
            floor += max(1, item.bit_length() * 3 // 10)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise invalid(f"{what} is not JSON: {show(item)} has no JSON form")
            floor += 1
        elif isinstance(item, str):
            floor += len(item) + 2
            if "\x00" in item[: max_bytes + 1]:
                raise invalid(f"{what} holds NUL (\\u0000), which PostgreSQL cannot store")
        elif isinstance(item, list | tuple):
            floor += max(2, len(item) + 1)
            if floor <= max_bytes:
                stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, dict):
            floor += max(2, 4 * len(item) + 1)
            if floor <= max_bytes:
                for key, child in item.items():
                    if not isinstance(key, str):
                        raise invalid(f"{what} is not JSON: object key {show(key)} is not a str")
                    if "\x00" in key:
                        raise invalid(f"{what} holds NUL (\\u0000), which PostgreSQL cannot store")
                    floor += len(key)
                    stack.append((child, depth + 1))
        else:
            raise invalid(f"{what} is not JSON: {type_name(item)} has no JSON form")
        if floor > max_bytes:
            raise too_big
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (ValueError, TypeError, RecursionError) as exc:  # an int of over 4300 digits
        raise invalid(f"{what} is not JSON: {show(str(exc))}") from None
    size = utf8_size(text, what)
    if size > max_bytes:
        raise invalid(f"{what} is {size} bytes, over the limit Limits.{setting}={max_bytes}")
    return text, size


def check_payload(payload: object, limits: Limits = DEFAULT_LIMITS) -> tuple[str, int]:
    """An event payload's JSON text and size, at most ``Limits.max_payload_bytes``."""
    return encode_json(
        payload,
        "event payload",
        limits,
        max_bytes=limits.max_payload_bytes,
        setting="max_payload_bytes",
    )


# -- refs -----------------------------------------------------------------------------


def check_attempt_ref(ref: object, what: str, limits: Limits = DEFAULT_LIMITS) -> AttemptRef:
    if not isinstance(ref, AttemptRef):
        raise invalid(f"{what} must be an AttemptRef, not {type_name(ref)}")
    return AttemptRef(
        check_name(ref.consumer, f"{what} consumer name", limits),
        check_lane(ref.lane, limits),
        check_index(ref.index, f"{what} index"),
        check_attempt(ref.attempt, f"{what} attempt"),
    )


def check_claim_ref(ref: object, what: str, limits: Limits = DEFAULT_LIMITS) -> ClaimRef:
    if not isinstance(ref, ClaimRef):
        raise invalid(f"{what} must be a ClaimRef, not {type_name(ref)}")
    return ClaimRef(
        check_name(ref.consumer, f"{what} consumer name", limits),
        check_lane(ref.lane, limits),
        check_index(ref.index, f"{what} index"),
    )


def check_attempt_refs(refs: object, what: str, limits: Limits) -> list[AttemptRef]:
    """The claims of a renew or release: at most ``Limits.max_claims``."""
    listed = items(refs, what, limit=limits.max_claims, setting="max_claims")
    return [check_attempt_ref(ref, "claim", limits) for ref in listed]


def check_claim_refs(refs: object, what: str, limits: Limits) -> list[ClaimRef]:
    """The heads a claim excludes: at most ``Limits.max_claims``."""
    listed = items(refs, what, limit=limits.max_claims, setting="max_claims")
    return [check_claim_ref(ref, what, limits) for ref in listed]


# -- consumers ------------------------------------------------------------------------


def check_log_spec(
    log: object, limits: Limits = DEFAULT_LIMITS, budget: CallBudget | None = None
) -> LogSpec:
    """A log spec with its types as a tuple (a list given is stored as a tuple by every
    backend); the types' bytes count against the call."""
    if not isinstance(log, LogSpec):
        raise invalid(f"a consumer's log must be a LogSpec, not {type_name(log)}")
    lane = check_name(log.lane, "log lane name", limits)
    types: tuple[str, ...] | None = None
    if log.types is not None:
        listed = items(
            log.types, "LogSpec.types", limit=limits.max_log_types, setting="max_log_types"
        )
        types = tuple(check_event_type(t, "log event type", limits) for t in listed)
        if budget is not None:
            budget.spend_bytes(sum(len(t.encode()) for t in types))
    if not isinstance(log.backfill, bool):
        raise invalid(f"LogSpec.backfill must be a bool, not {type_name(log.backfill)}")
    return LogSpec(lane, types, log.backfill)


def check_consumer(
    consumer: object, limits: Limits = DEFAULT_LIMITS, budget: CallBudget | None = None
) -> Consumer:
    if not isinstance(consumer, Consumer):
        raise invalid(f"consumers must hold Consumer, not {type_name(consumer)}")
    name = check_name(consumer.name, "consumer name", limits)
    log = None if consumer.log is None else check_log_spec(consumer.log, limits, budget)
    return Consumer(name, log)


def check_consumers(
    consumers: object, limits: Limits = DEFAULT_LIMITS, budget: CallBudget | None = None
) -> list[Consumer] | None:
    """Distinct consumers with valid specs (at most ``Limits.max_consumers``), or None
    (serve every consumer)."""
    if consumers is None:
        return None
    listed = items(consumers, "consumers", limit=limits.max_consumers, setting="max_consumers")
    checked: list[Consumer] = []
    seen: set[str] = set()
    for item in listed:
        consumer = check_consumer(item, limits, budget)
        if consumer.name in seen:
            raise invalid(f"consumer '{consumer.name}' is declared twice")
        seen.add(consumer.name)
        checked.append(consumer)
    return checked


def log_consumer_names(consumers: Sequence[Consumer] | None) -> frozenset[str]:
    return frozenset(c.name for c in consumers or () if c.log is not None)


# -- events ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckedEvent:
    """A ``NewEvent`` that passed validation (its targets a tuple), with its payload encoded."""

    event: NewEvent
    payload_json: str


def check_target(target: object, limits: Limits) -> Target:
    if not isinstance(target, Target):
        raise invalid(f"event targets must hold Target, not {type_name(target)}")
    return Target(
        check_name(target.consumer, "target consumer name", limits), check_lane(target.lane, limits)
    )


def check_event(
    event: object, position: int, limits: Limits, budget: CallBudget, *, need_ids: bool
) -> CheckedEvent:
    if not isinstance(event, NewEvent):
        raise invalid(f"events[{position}] must be a NewEvent, not {type_name(event)}")
    event_type = check_event_type(event.type, "event type", limits)
    if event_type == CLEAR_EVENT_TYPE:
        raise invalid(
            f"event type '{CLEAR_EVENT_TYPE}' is reserved for clear markers: call clear()"
        )
    event_id = None if event.id is None else check_event_id(event.id, limits)
    if event_id is None and need_ids:
        raise invalid(f"events[{position}] needs an id: a completion's id is its retry key")
    cause = None if event.cause is None else check_attempt_ref(event.cause, "event cause", limits)
    listed = items(event.targets, "event targets", limit=limits.max_targets, setting="max_targets")
    budget.spend_targets(len(listed))
    targets = tuple(check_target(target, limits) for target in listed)
    payload_json, size = check_payload(event.payload, limits)
    budget.spend_bytes(size)
    return CheckedEvent(NewEvent(event_type, event.payload, event_id, cause, targets), payload_json)


def check_events(
    events: object,
    limits: Limits = DEFAULT_LIMITS,
    budget: CallBudget | None = None,
    *,
    need_ids: bool = False,
) -> list[CheckedEvent]:
    """Checks a batch to append (``need_ids``: every event needs an id); its events,
    targets and payload bytes count against the call's ``budget``."""
    spent = budget or CallBudget(limits)
    batch = items(events, "events", limit=limits.max_batch_events, setting="max_batch_events")
    spent.spend_events(len(batch))
    return [
        check_event(event, position, limits, spent, need_ids=need_ids)
        for position, event in enumerate(batch)
    ]
