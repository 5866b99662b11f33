"""One argument check per Store operation: ``check_<op>(..., limits) -> <Op>Args``.

Every backend method opens with its operation's check, so bad input fails the same
way everywhere, before any I/O that could write. The checked values carry what the
backends need next (encoded payloads, resolved defaults), so nothing is checked or
encoded twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from ..errors import invalid
from ..models import (
    CLEAR_EVENT_TYPE,
    JSON,
    AttemptRef,
    ClaimRef,
    Completion,
    Consumer,
    LogSpec,
    NewEvent,
    RedriveAction,
    SnapshotWrite,
)
from .limits import Limits
from .rules import refuse_repeated_ids
from .values import (
    CheckedEvent,
    check_attempt_ref,
    check_claim_ref,
    check_consumers,
    check_datetime,
    check_error_text,
    check_events,
    check_holder,
    check_index,
    check_json,
    check_lane,
    check_log_spec,
    check_name,
    check_optional_bound,
    check_positive_count,
    check_redrive_action,
    check_seconds,
    check_session_id,
    check_text,
)

CLEAR_MARKER = CheckedEvent(NewEvent(CLEAR_EVENT_TYPE, None), "null")
"""The marker event ``clear`` appends, as a checked event."""


def _sequence(value: object, what: str) -> list[object]:
    """A list of the items of a sequence argument (not a str, bytes or mapping)."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise invalid(f"{what} must be a sequence")
    return list(value)


# -- the log --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AppendArgs:
    session_id: str
    events: list[CheckedEvent]
    consumers: Sequence[Consumer] | None
    origin_index: int | None

    @property
    def supplied_ids(self) -> list[str]:
        return [item.event.id for item in self.events if item.event.id is not None]


def check_append(
    session_id: object,
    events: object,
    *,
    consumers: object,
    origin_index: object,
    limits: Limits,
) -> AppendArgs:
    """``append``'s arguments; the same id twice in the batch is ``PARTIAL_DUPLICATE_BATCH``.

    Targets naming a registered log consumer are refused later, by
    ``rules.refuse_log_targets``, once the backend knows its registry.
    """
    sid = check_session_id(session_id, limits)
    served = check_consumers(consumers, limits)
    checked = check_events(events, limits)
    origin = None if origin_index is None else check_index(origin_index, "origin_index")
    args = AppendArgs(sid, checked, served, origin)
    refuse_repeated_ids(args.supplied_ids, "batch")
    return args


@dataclass(frozen=True, slots=True)
class ReadArgs:
    """Checked ``read`` arguments; ``types`` de-duplicated in the order given."""

    session_id: str
    after: int
    through: int | None
    types: tuple[str, ...] | None
    limit: int | None


def check_read(
    session_id: object,
    *,
    after: object,
    through: object,
    types: object,
    limit: object,
    limits: Limits,
) -> ReadArgs:
    sid = check_session_id(session_id, limits)
    checked_types: tuple[str, ...] | None = None
    if types is not None:
        if isinstance(types, str | bytes) or not isinstance(types, Sequence):
            raise invalid("types must be a sequence of event types")
        checked_types = tuple(
            dict.fromkeys(
                check_text(
                    t, "event type", max_length=limits.max_type_length, setting="max_type_length"
                )
                for t in types
            )
        )
    return ReadArgs(
        sid,
        check_optional_bound(after, "after") or 0,
        check_optional_bound(through, "through"),
        checked_types,
        check_optional_bound(limit, "limit"),
    )


@dataclass(frozen=True, slots=True)
class WakeLogArgs:
    session_id: str
    consumer: Consumer
    log: LogSpec


def check_wake_log(session_id: object, consumer: object, *, limits: Limits) -> WakeLogArgs:
    sid = check_session_id(session_id, limits)
    if not isinstance(consumer, Consumer):
        raise invalid(f"consumer must be a Consumer, not {type(consumer).__name__}")
    check_name(consumer.name, "consumer name", limits)
    if consumer.log is None:
        raise invalid(f"consumer '{consumer.name}' is not a log consumer")
    return WakeLogArgs(sid, consumer, check_log_spec(consumer.log, limits))


def check_session(session_id: object, *, limits: Limits) -> str:
    """The arguments of ``cursors``, ``dead_letters`` and ``reclaim``: a session id."""
    return check_session_id(session_id, limits)


@dataclass(frozen=True, slots=True)
class StreamArgs:
    session_id: str
    after: int


def check_stream(session_id: object, *, after: object, limits: Limits) -> StreamArgs:
    return StreamArgs(
        check_session_id(session_id, limits), check_optional_bound(after, "after") or 0
    )


@dataclass(frozen=True, slots=True)
class SessionsArgs:
    after: str | None
    limit: int


def check_sessions(*, after: object, limit: object, limits: Limits) -> SessionsArgs:
    checked_after = None if after is None else check_session_id(after, limits)
    return SessionsArgs(checked_after, check_positive_count(limit, "limit"))


# -- claims ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClaimArgs:
    session_id: str
    holder: str
    ttl: float
    exclude: list[ClaimRef]
    consumers: Sequence[Consumer] | None
    max_failures: int | None
    through: int | None

    @property
    def served(self) -> frozenset[str] | None:
        """The served consumers' names; None serves every consumer."""
        return None if self.consumers is None else frozenset(c.name for c in self.consumers)


def check_claim_available(
    session_id: object,
    *,
    holder: object,
    ttl: object,
    exclude: object,
    consumers: object,
    max_failures: object,
    through: object,
    limits: Limits,
) -> ClaimArgs:
    sid = check_session_id(session_id, limits)
    checked_holder = check_holder(holder, limits)
    seconds = check_seconds(ttl, "ttl")
    refs = [check_claim_ref(ref, "exclude", limits) for ref in _sequence(exclude, "exclude")]
    served = check_consumers(consumers, limits)
    failures = None if max_failures is None else check_positive_count(max_failures, "max_failures")
    return ClaimArgs(
        sid,
        checked_holder,
        seconds,
        refs,
        served,
        failures,
        check_optional_bound(through, "through"),
    )


@dataclass(frozen=True, slots=True)
class ClaimAnyArgs:
    holder: str
    ttl: float
    consumers: Sequence[Consumer] | None
    limit: int
    max_failures: int | None

    @property
    def served(self) -> frozenset[str] | None:
        return None if self.consumers is None else frozenset(c.name for c in self.consumers)


def check_claim_any(
    *,
    holder: object,
    ttl: object,
    consumers: object,
    limit: object,
    max_failures: object,
    limits: Limits,
) -> ClaimAnyArgs:
    checked_holder = check_holder(holder, limits)
    seconds = check_seconds(ttl, "ttl")
    served = check_consumers(consumers, limits)
    count = check_positive_count(limit, "limit")
    failures = None if max_failures is None else check_positive_count(max_failures, "max_failures")
    return ClaimAnyArgs(checked_holder, seconds, served, count, failures)


@dataclass(frozen=True, slots=True)
class HeldClaimsArgs:
    """The arguments of ``renew_claims`` (with ``ttl``) and ``release_claims`` (ttl 0)."""

    session_id: str
    holder: str
    claims: list[AttemptRef]
    ttl: float


def check_renew_claims(
    session_id: object, *, holder: object, claims: object, ttl: object, limits: Limits
) -> HeldClaimsArgs:
    sid = check_session_id(session_id, limits)
    checked_holder = check_holder(holder, limits)
    refs = [check_attempt_ref(ref, "claim", limits) for ref in _sequence(claims, "claims")]
    return HeldClaimsArgs(sid, checked_holder, refs, check_seconds(ttl, "ttl"))


def check_release_claims(
    session_id: object, *, holder: object, claims: object, limits: Limits
) -> HeldClaimsArgs:
    sid = check_session_id(session_id, limits)
    checked_holder = check_holder(holder, limits)
    refs = [check_attempt_ref(ref, "claim", limits) for ref in _sequence(claims, "claims")]
    return HeldClaimsArgs(sid, checked_holder, refs, 0.0)


# -- outcomes of attempts -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompletionArgs:
    """One checked completion: its returned events checked (each needs an id)."""

    completion: Completion
    events: list[CheckedEvent]

    @property
    def cause(self) -> AttemptRef:
        c = self.completion
        return AttemptRef(c.consumer, c.lane, c.index, c.attempt)

    @property
    def ids(self) -> list[str]:
        return [item.event.id or "" for item in self.events]


def check_complete_attempts(completions: object, *, limits: Limits) -> list[CompletionArgs]:
    """``complete_attempts``' batch. Targets naming a woken log consumer are refused by
    ``rules.refuse_log_targets`` once the backend knows each completion's wake set."""
    if isinstance(completions, str | bytes) or not isinstance(completions, Sequence):
        raise invalid("completions must be a sequence of Completion")
    checked = []
    for completion in completions:
        if not isinstance(completion, Completion):
            raise invalid(f"completions must hold Completion, not {type(completion).__name__}")
        check_session_id(completion.session_id, limits)
        check_name(completion.consumer, "consumer name", limits)
        check_lane(completion.lane, limits)
        check_index(completion.index)
        check_index(completion.attempt, "attempt")
        check_consumers(completion.consumers, limits)
        events = check_events(completion.events, limits, need_ids=True)
        checked.append(CompletionArgs(completion, events))
    return checked


@dataclass(frozen=True, slots=True)
class FailArgs:
    session_id: str
    attempt: AttemptRef
    error: str
    max_failures: int
    retry_after: float | None


def check_fail_attempt(
    session_id: object,
    *,
    consumer: object,
    lane: object,
    index: object,
    attempt: object,
    error: object,
    max_failures: object,
    retry_after: object,
    limits: Limits,
) -> FailArgs:
    sid = check_session_id(session_id, limits)
    ref = AttemptRef(
        check_name(consumer, "consumer name", limits),
        check_lane(lane, limits),
        check_index(index),
        check_index(attempt, "attempt"),
    )
    text = check_error_text(error, limits)
    failures = check_positive_count(max_failures, "max_failures")
    delay = None if retry_after is None else check_seconds(retry_after, "retry_after")
    return FailArgs(sid, ref, text, failures, delay)


@dataclass(frozen=True, slots=True)
class RedriveArgs:
    session_id: str
    consumer: str
    index: int
    action: RedriveAction
    consumers: Sequence[Consumer] | None


def check_redrive(
    session_id: object,
    *,
    consumer: object,
    index: object,
    action: object,
    consumers: object,
    limits: Limits,
) -> RedriveArgs:
    sid = check_session_id(session_id, limits)
    name = check_name(consumer, "consumer name", limits)
    checked_index = check_index(index)
    checked_action: RedriveAction = "retry" if check_redrive_action(action) == "retry" else "skip"
    served = check_consumers(consumers, limits)
    return RedriveArgs(sid, name, checked_index, checked_action, served)


# -- state snapshots ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReadStateArgs:
    session_id: str
    reducer: str
    through: int | None


def check_read_state(
    session_id: object, reducer: object, *, through: object, limits: Limits
) -> ReadStateArgs:
    sid = check_session_id(session_id, limits)
    name = check_name(reducer, "reducer name", limits)
    return ReadStateArgs(sid, name, check_optional_bound(through, "through"))


@dataclass(frozen=True, slots=True)
class CheckedSnapshot:
    """A snapshot write with its state already encoded as JSON text."""

    index: int
    state_json: str
    pins: tuple[ClaimRef, ...]


@dataclass(frozen=True, slots=True)
class PutSnapshotsArgs:
    session_id: str
    reducer: str
    writes: list[CheckedSnapshot]


def check_put_snapshots(
    session_id: object, reducer: object, writes: object, *, limits: Limits
) -> PutSnapshotsArgs:
    sid = check_session_id(session_id, limits)
    name = check_name(reducer, "reducer name", limits)
    if isinstance(writes, str | bytes) or not isinstance(writes, Iterable):
        raise invalid("writes must be a sequence of SnapshotWrite")
    checked = []
    for write in list(writes):
        if not isinstance(write, SnapshotWrite):
            raise invalid(f"writes must hold SnapshotWrite, not {type(write).__name__}")
        index = check_index(write.index, "snapshot index")
        state = check_json(write.state, "snapshot state", limits)
        pins = tuple(check_claim_ref(pin, "snapshot pin", limits) for pin in write.pins)
        checked.append(CheckedSnapshot(index, state, pins))
    return PutSnapshotsArgs(sid, name, checked)


# -- clear ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClearArgs:
    session_id: str
    if_last_index: int | None
    cause: AttemptRef | None


def check_clear(
    session_id: object, *, if_last_index: object, cause: object, limits: Limits
) -> ClearArgs:
    sid = check_session_id(session_id, limits)
    last = check_optional_bound(if_last_index, "if_last_index")
    checked_cause = None if cause is None else check_attempt_ref(cause, "clear cause", limits)
    return ClearArgs(sid, last, checked_cause)


# -- registry -------------------------------------------------------------------------


def check_register_consumers(consumers: object, *, limits: Limits) -> list[Consumer]:
    """The log consumers to register (targeted ones are ignored)."""
    checked = check_consumers(consumers, limits) or []
    return [consumer for consumer in checked if consumer.log is not None]


def check_unregister_consumers(names: object, *, limits: Limits) -> list[str]:
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise invalid("names must be a sequence of consumer names")
    return [check_name(name, "consumer name", limits) for name in names]


# -- presence -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PresenceWriteArgs:
    """A checked ``presence.write``: each field's value and ``seen`` encoded as JSON text."""

    ns: str
    participant: str
    values: dict[str, str]
    seen_json: str
    at: datetime
    ttl: float


def check_presence_write(
    ns: object,
    participant: object,
    values: object,
    *,
    at: object,
    seen: JSON,
    ttl: object,
    limits: Limits,
) -> PresenceWriteArgs:
    checked_ns = check_name(ns, "presence namespace", limits)
    who = check_name(participant, "presence participant", limits)
    if not isinstance(values, Mapping):
        raise invalid(f"presence values must be a mapping, not {type(values).__name__}")
    encoded = {
        check_name(field, "presence field", limits): check_json(value, "presence value", limits)
        for field, value in values.items()
    }
    seen_json = check_json(seen, "presence seen", limits)
    return PresenceWriteArgs(
        checked_ns,
        who,
        encoded,
        seen_json,
        check_datetime(at, "presence at"),
        check_seconds(ttl, "presence ttl"),
    )


def check_presence_read(ns: object, *, limits: Limits) -> str:
    return check_name(ns, "presence namespace", limits)
