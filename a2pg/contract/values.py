"""Checks of JSON values and of the contract's model values (refs, consumers, log specs,
events) that the argument checks of every operation are built from; each returns the
value normalised (lists as tuples, times in UTC) so backends store what was checked."""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta

from ..errors import invalid
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
from .budget import CallBudget, OffLoop
from .limits import DEFAULT_LIMITS, MAX_ATTEMPT, MAX_INDEX, Limits
from .render import show, type_name
from .scalars import (
    check_attempt,
    check_event_id,
    check_event_type,
    check_index,
    check_lane,
    check_name,
    check_time,
    items,
    plain_text,
    utf8_size,
)

# -- JSON -----------------------------------------------------------------------------


def _make_encoder() -> Callable[[object], str]:
    """``json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))``
    without building an encoder at each call: CPython's C encoder made once, where it is
    there and encodes a sample as ``json.dumps`` does; else a ``JSONEncoder`` made once.

    The C encoder's check for circular references is off: a value reaches it only once
    ``_plain_floor`` has walked it to its end (a cycle would nest past any depth)."""
    encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    try:
        chunks = make(
            None,
            encoder.default,
            json.encoder.encode_basestring,
            None,
            ":",
            ",",
            False,
            False,
            False,
        )

        def encode(value: object) -> str:
            return "".join(chunks(value, 0))

        sample = {"a": [1, -2.5e300, True, None, '\u00e9\x00"\\'], "b": {}, "c": -(10**20)}
        if encode(sample) == json.dumps(
            sample, ensure_ascii=False, allow_nan=False, separators=(",", ":")
        ):
            return encode
    except Exception:  # another interpreter's encoder: keep the portable one
        pass
    return encoder.encode


_encode = _make_encoder()

_ONE_BYTE: frozenset[type] = frozenset({float, bool, type(None)})
"""Scalar types ``_plain_floor`` counts as one byte at least (text of a bounded length)."""

_SHORT_INT = 1 << 64
"""``_plain_floor`` counts an int below this (20 digits at most) as one byte; a wider one
is left to ``_walk_json``, which bounds its digits before ``json.dumps`` writes them all."""


def _plain_floor(value: JSON, depth: int, max_depth: int, room: int) -> int:
    """A lower bound of the compact JSON size of ``value`` (a ``dict``, ``list`` or
    ``tuple``), or -1 unless it is plain: only the exact types ``None``, ``bool``,
    ``int``, ``float``, ``str``, ``list``, ``tuple`` and ``dict``, ``str`` keys, nested
    at most ``max_depth`` deep, and its bound at most ``room``.

    The common case's one walk: what it leaves to ``json.dumps`` (NaN, an int too long
    for text, NUL, lone surrogates, the size) comes out in the encoding, and anything
    else goes to ``_walk_json``. Each container's items are counted before they are
    read, so a huge value costs at most about ``room`` steps."""
    size = len(value)
    if not size:
        return 2
    if depth >= max_depth:  # its items would nest deeper than max_depth
        return -1
    inner = depth + 1
    if type(value) is dict:
        floor = 4 * size + 1
        if floor > room:
            return -1
        for key, child in value.items():
            if type(key) is not str:
                return -1
            kind = type(child)
            if kind is str:
                floor += len(key) + len(child) + 2
            elif (kind is int and -_SHORT_INT < child < _SHORT_INT) or kind in _ONE_BYTE:
                floor += len(key) + 1
            elif kind is dict or kind is list or kind is tuple:
                below = _plain_floor(child, inner, max_depth, room - floor - len(key))
                if below < 0:
                    return -1
                floor += len(key) + below
            else:
                return -1
    else:
        floor = size + 1
        if floor > room:
            return -1
        for child in value:
            kind = type(child)
            if kind is str:
                floor += len(child) + 2
            elif (kind is int and -_SHORT_INT < child < _SHORT_INT) or kind in _ONE_BYTE:
                floor += 1
            elif kind is dict or kind is list or kind is tuple:
                below = _plain_floor(child, inner, max_depth, room - floor)
                if below < 0:
                    return -1
                floor += below
            else:
                return -1
    return floor if floor <= room else -1


def _plain_json(value: JSON, max_depth: int, max_bytes: int) -> tuple[str, int] | None:
    """``value``'s compact JSON text and UTF-8 size when ``_walk_json`` would return them
    (a plain value, within the limits, without NUL or what JSON cannot say); else None.

    ``json.dumps`` writes a NUL as ``\\u0000``: text without that holds none (a text's
    own backslash is written ``\\\\``, so its absence rules that out too)."""
    kind = type(value)
    if kind is dict or kind is list or kind is tuple:
        try:
            if _plain_floor(value, 0, max_depth, max_bytes) < 0:
                return None
        except RecursionError:  # a max_json_depth past Python's stack: the long way
            return None
    elif kind is str:
        if len(value) + 2 > max_bytes:
            return None
    elif not ((kind is int and -_SHORT_INT < value < _SHORT_INT) or kind in _ONE_BYTE):
        return None
    try:
        text = _encode(value)
        size = len(text) if text.isascii() else len(text.encode())
    except Exception:  # NaN, an int of over 4300 digits, a lone surrogate: the long way
        return None
    if size > max_bytes or ("\\" in text and "\\u0000" in text):  # most texts hold no "\\"
        return None
    return text, size


def encode_json(
    value: object, what: str, limits: Limits, *, max_bytes: int, setting: str
) -> tuple[str, int]:
    """Checks that ``value`` is plain JSON PostgreSQL can store within ``max_bytes``;
    returns its compact JSON text and its size in UTF-8 bytes.

    A plain value that fits (``_plain_json``) is walked once and encoded once; any other
    value is checked by ``_walk_json``, which says why it is refused."""
    plain = _plain_json(value, limits.max_json_depth, max_bytes)
    if plain is not None:
        return plain
    return _walk_json(value, what, limits, max_bytes=max_bytes, setting=setting)


def _walk_json(
    value: object, what: str, limits: Limits, *, max_bytes: int, setting: str
) -> tuple[str, int]:
    """``encode_json`` the long way, for any value: the first fault found is the error.

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


def spend_json(
    value: object, what: str, limits: Limits, budget: CallBudget, *, max_bytes: int, setting: str
) -> tuple[str, int]:
    """``encode_json`` of one value of a call, its bytes spent from the call's ``budget``.

    On the event loop (a budget with ``loop_bytes``) the value's walk is bounded by what
    the loop has left (``CallBudget.room``): one that does not fit, or needs the long
    way, raises ``OffLoop`` and the whole call is checked again in a worker thread."""
    room = budget.room(max_bytes)
    encoded = _plain_json(value, limits.max_json_depth, room)
    if encoded is None:
        if room < max_bytes:
            raise OffLoop
        encoded = _walk_json(value, what, limits, max_bytes=max_bytes, setting=setting)
    budget.spend_bytes(encoded[1])
    return encoded


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


def _slot_setters(cls: type, names: tuple[str, ...]) -> list[Callable[[object, object], None]]:
    """The setters of the slots of the frozen dataclass ``cls``, in field order, when its
    fields and slots are ``names`` and it has no ``__post_init__``; else none."""
    slots = tuple(cls.__dict__.get("__slots__", ()))
    if tuple(spec.name for spec in fields(cls)) != names or slots != names:
        return []
    if hasattr(cls, "__post_init__"):
        return []
    return [cls.__dict__[name].__set__ for name in names]


# A frozen dataclass's __init__ sets each field through object.__setattr__; setting the
# slots of object.__new__(cls) builds the same value in about half the time. Each event of
# an append builds a CheckedEvent (and a NewEvent, unless it can keep the caller's), so
# both are built so where their shape allows; a field added later falls back to cls(...).
_EVENT_SETTERS = _slot_setters(NewEvent, ("type", "payload", "id", "cause", "targets"))
_CHECKED_SETTERS = _slot_setters(CheckedEvent, ("event", "payload_json"))


def _new_event(
    event_type: str,
    payload: JSON,
    event_id: str | None,
    cause: AttemptRef | None,
    targets: tuple[Target, ...],
) -> NewEvent:
    """``NewEvent(event_type, payload, event_id, cause, targets)``."""
    if not _EVENT_SETTERS:
        return NewEvent(event_type, payload, event_id, cause, targets)
    set_type, set_payload, set_id, set_cause, set_targets = _EVENT_SETTERS
    event = object.__new__(NewEvent)
    set_type(event, event_type)
    set_payload(event, payload)
    set_id(event, event_id)
    set_cause(event, cause)
    set_targets(event, targets)
    return event


def _new_checked(event: NewEvent, payload_json: str) -> CheckedEvent:
    """``CheckedEvent(event, payload_json)``."""
    if not _CHECKED_SETTERS:
        return CheckedEvent(event, payload_json)
    set_event, set_json = _CHECKED_SETTERS
    checked = object.__new__(CheckedEvent)
    set_event(checked, event)
    set_json(checked, payload_json)
    return checked


def check_target(target: object, limits: Limits) -> Target:
    if not isinstance(target, Target):
        raise invalid(f"event targets must hold Target, not {type_name(target)}")
    return Target(
        check_name(target.consumer, "target consumer name", limits),
        check_lane(target.lane, limits),
        check_not_before(target.not_before, limits),
    )


def check_not_before(value: object, limits: Limits) -> datetime | timedelta | None:
    """A target's delay: None, an aware datetime (in the past: no delay), returned in UTC,
    or a ``timedelta`` from the append, at least 0 and at most ``Limits.max_seconds``."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
        if not 0 <= seconds <= limits.max_seconds:
            raise invalid(
                "Target.not_before as a timedelta must be at least 0 and at most "
                f"Limits.max_seconds={limits.max_seconds} seconds, got {show(value)}"
            )
        return value
    if isinstance(value, datetime):
        return check_time(value, "Target.not_before")
    raise invalid(
        f"Target.not_before must be an aware datetime, a timedelta or None, not {type_name(value)}"
    )


def refuse_conflicting_targets(targets: Sequence[Target], position: int) -> None:
    """One event may name a cursor twice only with the same delay: two ``not_before`` for
    one event or lane cursor is ambiguous (``INVALID_ARGUMENT``)."""
    if len(targets) < 2 or all(target.not_before is None for target in targets):
        return
    seen: dict[tuple[str, str | None], object] = {}
    for target in targets:
        key = (target.consumer, target.lane)
        if key in seen and seen[key] != target.not_before:
            raise invalid(
                f"events[{position}] targets consumer {show(target.consumer)} lane "
                f"{show(target.lane)} twice with different not_before"
            )
        seen[key] = target.not_before


class _Known:
    """What one call's events have shown valid so far (event types; consumer and lane
    names, which share their limits): a repeat is taken without checking it again.

    Only exact ``str`` values are kept, and only once their check passed; each then
    passes again as itself, so skipping its check changes nothing but the time spent."""

    __slots__ = ("limits", "names", "types")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.types: set[str] = set()
        self.names: set[str] = set()

    def name(self, value: object) -> bool:
        """Whether ``check_name`` passes ``value`` (an exact str) as it is."""
        if type(value) is not str:
            return False
        if value in self.names:
            return True
        limits = self.limits
        if plain_text(value, limits.max_name_length, limits.max_name_bytes):
            self.names.add(value)
            return True
        return False

    def target(self, target: object) -> Target:
        """``check_target``: ``target`` itself when it is an undelayed ``Target`` whose
        names pass."""
        if type(target) is Target and target.not_before is None and self.name(target.consumer):
            lane = target.lane
            if lane is None or self.name(lane):
                return target
        return check_target(target, self.limits)

    def cause(self, cause: object) -> AttemptRef:
        """``check_attempt_ref`` of an event cause: ``cause`` itself when it is an
        ``AttemptRef`` of valid names, index and attempt."""
        if type(cause) is AttemptRef and self.name(cause.consumer):
            lane, index, attempt = cause.lane, cause.index, cause.attempt
            if (
                (lane is None or self.name(lane))
                and type(index) is int
                and 1 <= index <= MAX_INDEX
                and type(attempt) is int
                and 1 <= attempt <= MAX_ATTEMPT
            ):
                return cause
        return check_attempt_ref(cause, "event cause", self.limits)


def check_event(
    event: object, position: int, limits: Limits, budget: CallBudget, *, need_ids: bool
) -> CheckedEvent:
    """One event of a batch (``position`` in it), checked as ``check_events`` checks each."""
    return _check_event(event, position, limits, budget, need_ids, _Known(limits))


def _check_event(
    event: object, position: int, limits: Limits, budget: CallBudget, need_ids: bool, known: _Known
) -> CheckedEvent:
    """One event, checked in this order: its type, id, cause, targets (their count against
    the call first) and payload (its bytes against the call last); the first fault is the
    error. ``known``: what the call's earlier events showed valid.

    An exact ``NewEvent`` that needs no normalising (its targets a tuple of exact
    ``Target``) is kept as it is rather than rebuilt."""
    if not isinstance(event, NewEvent):
        raise invalid(f"events[{position}] must be a NewEvent, not {type_name(event)}")
    event_type = event.type
    if type(event_type) is not str or event_type not in known.types:
        event_type = check_event_type(event_type, "event type", limits)
        if event_type == CLEAR_EVENT_TYPE:
            raise invalid(
                f"event type '{CLEAR_EVENT_TYPE}' is reserved for clear markers: call clear()"
            )
        if type(event_type) is str:
            known.types.add(event_type)
    event_id = event.id
    if event_id is None:
        if need_ids:
            raise invalid(f"events[{position}] needs an id: a completion's id is its retry key")
    elif not plain_text(event_id, limits.max_id_length, limits.max_id_bytes):
        event_id = check_event_id(event_id, limits)
    cause = event.cause
    if cause is not None:
        cause = known.cause(cause)
    given = event.targets
    kind = type(given)
    if (kind is tuple or kind is list) and len(given) <= limits.max_targets:
        listed: Sequence[object] = given
    else:
        listed = items(given, "event targets", limit=limits.max_targets, setting="max_targets")
    budget.spend_targets(len(listed))
    targets: Sequence[Target] = ()
    if len(listed) == 1:
        only = listed[0]
        checked = known.target(only)
        targets = given if kind is tuple and checked is only else (checked,)
    elif listed:
        every = [known.target(target) for target in listed]
        same = kind is tuple and all(map(operator.is_, every, listed))
        targets = given if same else tuple(every)
        refuse_conflicting_targets(targets, position)
    payload = event.payload
    payload_json, _ = spend_json(
        payload,
        "event payload",
        limits,
        budget,
        max_bytes=limits.max_payload_bytes,
        setting="max_payload_bytes",
    )
    if (
        type(event) is not NewEvent
        or targets is not given
        or event_type is not event.type
        or event_id is not event.id
        or cause is not event.cause
    ):
        event = _new_event(event_type, payload, event_id, cause, tuple(targets))
    return _new_checked(event, payload_json)


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
    known = _Known(limits)
    return [
        _check_event(event, position, limits, spent, need_ids, known)
        for position, event in enumerate(batch)
    ]
