"""One argument check per Store operation: ``check_<op>(..., limits) -> <Op>Args``.

Every backend method opens with its operation's check, so bad input fails the same
way everywhere, before any I/O that could write. The checked values carry what the
backends need next (encoded payloads, resolved defaults), so nothing is checked or
encoded twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from typing import cast

from ..errors import invalid
from ..models import (
    AUDIT_ACTIONS,
    CLEAR_EVENT_TYPE,
    JSON,
    WORK_STATES,
    AnyLane,
    AttemptRef,
    AuditEntry,
    CancelAction,
    ClaimRef,
    Completion,
    Consumer,
    DeadLetterKey,
    DeadLetterQuery,
    HeadKey,
    HeadQuery,
    LogSpec,
    NewEvent,
    RedriveAction,
    SnapshotWrite,
    WorkerBeat,
)
from .budget import CallBudget
from .limits import MAX_ATTEMPT, MAX_INDEX, Limits
from .propagation import check_trace_parent
from .render import show, type_name
from .rules import refuse_repeated_ids
from .scalars import (
    check_attempt,
    check_count,
    check_error_filter,
    check_error_text,
    check_event_type,
    check_holder,
    check_index,
    check_lane,
    check_max_failures,
    check_name,
    check_natural,
    check_optional_bound,
    check_redrive_action,
    check_seconds,
    check_session_id,
    check_text,
    check_time,
    items,
    plain_text,
)
from .values import (
    CheckedEvent,
    _slot_setters,
    check_attempt_ref,
    check_attempt_refs,
    check_claim_ref,
    check_claim_refs,
    check_consumer,
    check_consumers,
    check_events,
    encode_json,
    spend_json,
)

CLEAR_MARKER = CheckedEvent(NewEvent(CLEAR_EVENT_TYPE, None), "null")
"""The marker event ``clear`` appends, as a checked event."""


# -- the log --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AppendArgs:
    session_id: str
    events: list[CheckedEvent]
    consumers: Sequence[Consumer] | None
    origin_index: int | None
    trace_parent: str | None = None
    """The W3C context stored with each event (``contract.propagation``), or None."""

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
    loop_bytes: int | None = None,
    trace_parent: object = None,
) -> AppendArgs:
    """``append``'s arguments; the same id twice in the batch is ``PARTIAL_DUPLICATE_BATCH``.
    ``trace_parent``: the trace context the front found (``propagation.current``).

    Targets naming a registered log consumer are refused later, by
    ``rules.refuse_log_targets``, once the backend knows its registry. ``loop_bytes``:
    the most JSON bytes to encode here, on the event loop (see ``CallBudget``).
    """
    sid = check_session_id(session_id, limits)
    budget = CallBudget(limits, loop_bytes)
    served = check_consumers(consumers, limits, budget)
    checked = check_events(events, limits, budget)
    origin = None if origin_index is None else check_index(origin_index, "origin_index")
    args = AppendArgs(sid, checked, served, origin, check_trace_parent(trace_parent))
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
        listed = items(types, "types", limit=limits.max_log_types, setting="max_log_types")
        checked_types = tuple(
            dict.fromkeys(check_event_type(t, "event type", limits) for t in listed)
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
        raise invalid(f"consumer must be a Consumer, not {type_name(consumer)}")
    checked = check_consumer(consumer, limits)
    if checked.log is None:
        raise invalid(f"consumer '{checked.name}' is not a log consumer")
    return WakeLogArgs(sid, checked, checked.log)


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
    count = check_count(limit, "limit", maximum=limits.max_page_size, setting="max_page_size")
    return SessionsArgs(checked_after, count)


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
    seconds = check_seconds(ttl, "ttl", limits)
    refs = check_claim_refs(exclude, "exclude", limits)
    served = check_consumers(consumers, limits, CallBudget(limits))
    failures = None if max_failures is None else check_max_failures(max_failures)
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
    plain = _plain_claim_any(holder, ttl, consumers, limit, max_failures, limits)
    if plain is not None:
        return plain
    checked_holder = check_holder(holder, limits)
    seconds = check_seconds(ttl, "ttl", limits)
    served = check_consumers(consumers, limits, CallBudget(limits))
    count = check_count(limit, "limit", maximum=limits.max_claim_limit, setting="max_claim_limit")
    failures = None if max_failures is None else check_max_failures(max_failures)
    return ClaimAnyArgs(checked_holder, seconds, served, count, failures)


def _plain_claim_any(
    holder: object,
    ttl: object,
    consumers: object,
    limit: object,
    max_failures: object,
    limits: Limits,
) -> ClaimAnyArgs | None:
    """``check_claim_any``'s result when every argument is already as checked (a worker's
    own: an exact ``float`` ttl, exact ``int`` counts in range, a plain holder and
    ``_plain_consumers``), without building an error on the way; else None, and the long
    way says why (or normalises)."""
    if not (
        type(ttl) is float
        and 0 < ttl <= limits.max_seconds
        and type(limit) is int
        and 1 <= limit <= limits.max_claim_limit
        and (
            max_failures is None or (type(max_failures) is int and 1 <= max_failures <= MAX_ATTEMPT)
        )
        and plain_text(holder, limits.max_name_length, limits.max_name_bytes)
    ):
        return None
    served = None if consumers is None else _plain_consumers(consumers, limits)
    if served is None and consumers is not None:
        return None
    return ClaimAnyArgs(cast(str, holder), ttl, served, limit, max_failures)


def _plain_consumers(consumers: object, limits: Limits) -> list[Consumer] | None:
    """``check_consumers``' list when ``consumers`` is a list or tuple of distinct exact
    ``Consumer`` that are targeted (no log spec) and named within the limits: those
    themselves (frozen, and as checked); else None (``None`` too: the long way says)."""
    kind = type(consumers)
    if not (kind is list or kind is tuple):
        return None
    listed = cast(Sequence[object], consumers)
    if len(listed) > limits.max_consumers:
        return None
    names: set[str] = set()
    for consumer in listed:
        if type(consumer) is not Consumer or consumer.log is not None:
            return None
        name = consumer.name
        if name in names or not plain_text(name, limits.max_name_length, limits.max_name_bytes):
            return None
        names.add(name)
    return cast(list[Consumer], list(listed))


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
    refs = check_attempt_refs(claims, "claims", limits)
    return HeldClaimsArgs(sid, checked_holder, refs, check_seconds(ttl, "ttl", limits))


def check_release_claims(
    session_id: object, *, holder: object, claims: object, limits: Limits
) -> HeldClaimsArgs:
    sid = check_session_id(session_id, limits)
    checked_holder = check_holder(holder, limits)
    refs = check_attempt_refs(claims, "claims", limits)
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


@dataclass(frozen=True, slots=True)
class CompletionItem:
    """One checked completion, with the log consumers its writes wake."""

    args: CompletionArgs
    wake: Sequence[Consumer]


def check_complete_attempts(
    completions: object, *, limits: Limits, loop_bytes: int | None = None
) -> list[CompletionArgs]:
    """``complete_attempts``' batch: at most ``Limits.max_completions``, whose returned
    events, targets and bytes count together against the call's limits. Each completion
    comes back normalised (its events and consumers as checked). Targets naming a woken
    log consumer are refused by ``rules.refuse_log_targets`` once the backend knows each
    completion's wake set. ``loop_bytes`` as for ``check_append``."""
    listed = items(
        completions, "completions", limit=limits.max_completions, setting="max_completions"
    )
    budget = CallBudget(limits, loop_bytes)
    checked = []
    for completion in listed:
        plain = _plain_completion(completion, limits, budget)
        if plain is not None:
            checked.append(plain)
            continue
        if not isinstance(completion, Completion):
            raise invalid(f"completions must hold Completion, not {type_name(completion)}")
        sid = check_session_id(completion.session_id, limits)
        consumer = check_name(completion.consumer, "consumer name", limits)
        lane = check_lane(completion.lane, limits)
        index = check_index(completion.index)
        attempt = check_attempt(completion.attempt)
        served = check_consumers(completion.consumers, limits, budget)
        events = check_events(completion.events, limits, budget, need_ids=True)
        normalised = Completion(
            sid,
            consumer,
            lane,
            index,
            attempt,
            tuple(item.event for item in events),
            None if served is None else tuple(served),
            check_trace_parent(completion.trace_parent),
        )
        checked.append(CompletionArgs(normalised, events))
    return checked


def _make_completion_args() -> Callable[[Completion, list[CheckedEvent]], CompletionArgs]:
    """``CompletionArgs(completion, events)``, built by setting its slots as ``values``
    builds checked events (one per completion of a worker's every cycle)."""
    setters = _slot_setters(CompletionArgs, ("completion", "events"))
    if not setters:
        return CompletionArgs
    set_completion, set_events = setters
    new = object.__new__

    def completion_args(completion: Completion, events: list[CheckedEvent]) -> CompletionArgs:
        made = new(CompletionArgs)
        set_completion(made, completion)
        set_events(made, events)
        return made

    return completion_args


_completion_args = _make_completion_args()


def _plain_completion(
    completion: object, limits: Limits, budget: CallBudget
) -> CompletionArgs | None:
    """``check_complete_attempts``' result for one completion when its fields need no
    normalising (an exact ``Completion`` of exact ``str`` names within the limits, exact
    ``int`` index and attempt in range, no ``consumers``), without building an error on
    the way; else None, and the long way says why (or normalises).

    Its events are checked as the long way checks them (``check_events``, against the same
    ``budget``); none returned, the common case, costs no check at all: the long way
    spends nothing on an empty tuple or list either."""
    if (
        type(completion) is not Completion
        or completion.consumers is not None
        or completion.trace_parent is not None
    ):
        return None
    session_id, consumer, lane = completion.session_id, completion.consumer, completion.lane
    index, attempt = completion.index, completion.attempt
    if not (
        type(index) is int
        and 1 <= index <= MAX_INDEX
        and type(attempt) is int
        and 1 <= attempt <= MAX_ATTEMPT
        and plain_text(session_id, limits.max_session_id_length, limits.max_session_id_bytes)
        and plain_text(consumer, limits.max_name_length, limits.max_name_bytes)
        and (lane is None or plain_text(lane, limits.max_name_length, limits.max_name_bytes))
    ):
        return None
    given = completion.events
    kind = type(given)
    if (kind is tuple or kind is list) and not given:
        if kind is tuple:
            return _completion_args(completion, [])
        return _completion_args(Completion(session_id, consumer, lane, index, attempt, ()), [])
    events = check_events(given, limits, budget, need_ids=True)
    normalised = Completion(
        session_id, consumer, lane, index, attempt, tuple(item.event for item in events), None
    )
    return CompletionArgs(normalised, events)


@dataclass(frozen=True, slots=True)
class CompleteAndClaimArgs:
    completions: list[CompletionArgs]
    claim: ClaimAnyArgs


def check_complete_and_claim(
    completions: object,
    *,
    holder: object,
    ttl: object,
    consumers: object,
    limit: object,
    max_failures: object,
    limits: Limits,
    loop_bytes: int | None = None,
) -> CompleteAndClaimArgs:
    """``complete_attempts``' batch and ``claim_any``'s arguments, each checked as there."""
    return CompleteAndClaimArgs(
        check_complete_attempts(completions, limits=limits, loop_bytes=loop_bytes),
        check_claim_any(
            holder=holder,
            ttl=ttl,
            consumers=consumers,
            limit=limit,
            max_failures=max_failures,
            limits=limits,
        ),
    )


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
        check_attempt(attempt),
    )
    text = check_error_text(error, limits)
    failures = check_max_failures(max_failures)
    delay = None if retry_after is None else check_seconds(retry_after, "retry_after", limits)
    return FailArgs(sid, ref, text, failures, delay)


@dataclass(frozen=True, slots=True)
class RedriveArgs:
    session_id: str
    consumer: str
    index: int
    action: RedriveAction
    consumers: Sequence[Consumer] | None
    lane: str | AnyLane | None
    """The cursor whose dead head to take: ``ANY_LANE`` (the one ``dead_letters`` lists
    first), ``None`` (the event cursor) or a lane name."""


def check_cursor_lane(lane: object, limits: Limits) -> str | AnyLane | None:
    """The cursor a call names by its lane: ``ANY_LANE`` (whichever the call picks), ``None``
    (the event cursor) or a lane name (``redrive``, ``cancel_head``, ``attempts``)."""
    return lane if isinstance(lane, AnyLane) else check_lane(lane, limits)


def check_redrive(
    session_id: object,
    *,
    consumer: object,
    index: object,
    action: object,
    consumers: object,
    lane: object,
    limits: Limits,
) -> RedriveArgs:
    sid = check_session_id(session_id, limits)
    name = check_name(consumer, "consumer name", limits)
    checked_index = check_index(index)
    checked_action: RedriveAction = "retry" if check_redrive_action(action) == "retry" else "skip"
    served = check_consumers(consumers, limits, CallBudget(limits))
    checked_lane = check_cursor_lane(lane, limits)
    return RedriveArgs(sid, name, checked_index, checked_action, served, checked_lane)


@dataclass(frozen=True, slots=True)
class CancelArgs:
    session_id: str
    consumer: str
    index: int
    action: CancelAction
    consumers: Sequence[Consumer] | None
    lane: str | AnyLane | None
    """As ``RedriveArgs.lane``: ``ANY_LANE`` takes the first live head ``cursors`` lists."""


def check_cancel_head(
    session_id: object,
    *,
    consumer: object,
    index: object,
    action: object,
    consumers: object,
    lane: object,
    limits: Limits,
) -> CancelArgs:
    sid = check_session_id(session_id, limits)
    name = check_name(consumer, "consumer name", limits)
    checked_index = check_index(index)
    if not isinstance(action, str) or action not in ("skip", "dead_letter"):
        raise invalid(f"cancel action must be 'skip' or 'dead_letter', got {show(action)}")
    checked_action: CancelAction = "skip" if action == "skip" else "dead_letter"
    served = check_consumers(consumers, limits, CallBudget(limits))
    checked_lane = check_cursor_lane(lane, limits)
    return CancelArgs(sid, name, checked_index, checked_action, served, checked_lane)


@dataclass(frozen=True, slots=True)
class AttemptsArgs:
    session_id: str
    consumer: str
    index: int
    lane: str | AnyLane | None
    """``ANY_LANE``: every cursor of the consumer at that index; else that cursor."""


def check_attempts(
    session_id: object, *, consumer: object, index: object, lane: object, limits: Limits
) -> AttemptsArgs:
    sid = check_session_id(session_id, limits)
    name = check_name(consumer, "consumer name", limits)
    checked_lane = check_cursor_lane(lane, limits)
    return AttemptsArgs(sid, name, check_index(index), checked_lane)


MIN_BUCKET = 1.0
MAX_BUCKET = 86_400.0
"""``activity``'s bucket sizes, in seconds: one second to one day."""


@dataclass(frozen=True, slots=True)
class ActivityArgs:
    """``bucket_us`` is the bucket in whole microseconds: every backend floors event
    times on integers, so a bucket like 3600.0000000000005 puts an attempt in the same
    bucket everywhere."""

    since: datetime
    bucket_us: int


def check_activity(*, since: object, bucket: object) -> ActivityArgs:
    """``since`` an aware datetime in range (UTC), ``bucket`` seconds in [1, 86400]."""
    checked = check_time(since, "since")
    if isinstance(bucket, bool) or not isinstance(bucket, int | float):
        raise invalid(f"bucket must be a number of seconds, not {type_name(bucket)}")
    if not MIN_BUCKET <= bucket <= MAX_BUCKET:  # false for NaN
        raise invalid(f"bucket must be from 1 to 86400 seconds, got {show(bucket)}")
    return ActivityArgs(checked, round(bucket * 1_000_000))


MAX_PRUNE = 100_000
"""The most attempts one ``prune_attempts`` call deletes (its batch)."""


@dataclass(frozen=True, slots=True)
class PruneAttemptsArgs:
    before: datetime
    limit: int


def check_prune_attempts(*, before: object, limit: object) -> PruneAttemptsArgs:
    """``before`` an aware datetime in range (UTC), ``limit`` in [1, ``MAX_PRUNE``]."""
    return PruneAttemptsArgs(
        check_time(before, "before"), check_count(limit, "limit", maximum=MAX_PRUNE)
    )


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
    session_id: object,
    reducer: object,
    writes: object,
    *,
    limits: Limits,
    loop_bytes: int | None = None,
) -> PutSnapshotsArgs:
    """At most ``Limits.max_snapshot_writes`` writes, each state at most
    ``Limits.max_state_bytes``, ``Limits.max_pins`` pins in all, and the states'
    bytes within the call's ``Limits.max_call_bytes``; ``loop_bytes`` as for
    ``check_append``."""
    sid = check_session_id(session_id, limits)
    name = check_name(reducer, "reducer name", limits)
    listed = items(
        writes, "writes", limit=limits.max_snapshot_writes, setting="max_snapshot_writes"
    )
    budget = CallBudget(limits, loop_bytes)
    pinned = 0
    checked = []
    for write in listed:
        if not isinstance(write, SnapshotWrite):
            raise invalid(f"writes must hold SnapshotWrite, not {type_name(write)}")
        index = check_index(write.index, "snapshot index")
        state, _ = spend_json(
            write.state,
            "snapshot state",
            limits,
            budget,
            max_bytes=limits.max_state_bytes,
            setting="max_state_bytes",
        )
        pins = items(write.pins, "snapshot pins", limit=limits.max_pins, setting="max_pins")
        pinned += len(pins)
        if pinned > limits.max_pins:
            raise invalid(
                f"the call pins more than {limits.max_pins} heads in all, "
                f"over the limit Limits.max_pins={limits.max_pins}"
            )
        checked_pins = tuple(check_claim_ref(pin, "snapshot pin", limits) for pin in pins)
        checked.append(CheckedSnapshot(index, state, checked_pins))
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
    if consumers is None:
        raise invalid("consumers must be a sequence, not NoneType")
    checked = check_consumers(consumers, limits, CallBudget(limits)) or []
    return [consumer for consumer in checked if consumer.log is not None]


def check_unregister_consumers(names: object, *, limits: Limits) -> list[str]:
    listed = items(names, "names", limit=limits.max_consumers, setting="max_consumers")
    return [check_name(name, "consumer name", limits) for name in listed]


def check_pause_consumers(names: object, *, limits: Limits) -> list[str]:
    """The consumers to pause, each once: names as ``unregister_consumers`` takes them (any
    consumer may be paused, targeted ones too, so no registry is consulted)."""
    return list(dict.fromkeys(check_unregister_consumers(names, limits=limits)))


def check_resume_consumers(names: object, *, limits: Limits) -> list[str]:
    """The consumers to resume, each once, checked as ``pause_consumers``'s."""
    return check_pause_consumers(names, limits=limits)


def check_next_due(consumers: object, *, limits: Limits) -> Sequence[Consumer] | None:
    """``next_due_in``'s consumers: None (all) or consumers as ``claim_any`` takes them."""
    return check_consumers(consumers, limits, CallBudget(limits))


@dataclass(frozen=True, slots=True)
class BackfillArgs:
    consumer: str
    limit: int


def check_backfill(consumer: object, *, limit: object, limits: Limits) -> BackfillArgs:
    """A consumer name and a batch size in [1, ``Limits.max_page_size``] (sessions)."""
    name = check_name(consumer, "consumer name", limits)
    count = check_count(limit, "limit", maximum=limits.max_page_size, setting="max_page_size")
    return BackfillArgs(name, count)


# -- monitoring -----------------------------------------------------------------------


def check_find_dead_letters(query: object, *, limits: Limits) -> DeadLetterQuery:
    """A ``DeadLetterQuery``: each filter None or a non-empty text without NUL (a consumer
    name, an error text of at most ``Limits.max_error_length`` characters, a session id
    prefix), ``after`` a ``DeadLetterKey`` (lane ``""`` for an event cursor), ``limit``
    in [1, ``Limits.max_page_size``]."""
    if not isinstance(query, DeadLetterQuery):
        raise invalid(f"query must be a DeadLetterQuery, not {type_name(query)}")
    consumer = query.consumer
    consumer = None if consumer is None else check_name(consumer, "consumer name", limits)
    error = None if query.error is None else check_error_filter(query.error, limits)
    prefix = query.session_prefix
    prefix = None if prefix is None else check_session_id(prefix, limits)
    after = None if query.after is None else _check_dead_letter_key(query.after, limits)
    count = check_count(query.limit, "limit", maximum=limits.max_page_size, setting="max_page_size")
    return DeadLetterQuery(consumer, error, prefix, after, count)


def _check_dead_letter_key(key: object, limits: Limits) -> DeadLetterKey:
    if not isinstance(key, DeadLetterKey):
        raise invalid(f"after must be a DeadLetterKey, not {type_name(key)}")
    return DeadLetterKey(
        check_session_id(key.session_id, limits),
        check_name(key.consumer, "consumer name", limits),
        "" if key.lane == "" else check_name(key.lane, "lane name", limits),
        check_index(key.index),
    )


def check_find_heads(query: object, *, limits: Limits) -> HeadQuery:
    """A ``HeadQuery``: ``state`` one of ``WORK_STATES``; each filter None or a non-empty
    text without NUL (a consumer name, an event type, an error text of at most
    ``Limits.max_error_length`` characters, a session id prefix); ``after`` a ``HeadKey``
    (an aware time, lane ``""`` for an event cursor); ``limit`` in [1,
    ``Limits.max_page_size``]."""
    if not isinstance(query, HeadQuery):
        raise invalid(f"query must be a HeadQuery, not {type_name(query)}")
    given = query.state
    state = next((s for s in WORK_STATES if s == given), None) if type(given) is str else None
    if state is None:
        raise invalid(f"state must be one of {', '.join(WORK_STATES)}, got {show(query.state)}")
    consumer = query.consumer
    consumer = None if consumer is None else check_name(consumer, "consumer name", limits)
    event_type = query.event_type
    event_type = None if event_type is None else check_event_type(event_type, "event type", limits)
    error = None if query.error is None else check_error_filter(query.error, limits)
    prefix = query.session_prefix
    prefix = None if prefix is None else check_session_id(prefix, limits)
    after = None if query.after is None else _check_head_key(query.after, limits)
    count = check_count(query.limit, "limit", maximum=limits.max_page_size, setting="max_page_size")
    return HeadQuery(state, consumer, event_type, error, prefix, after, count)


def _check_head_key(key: object, limits: Limits) -> HeadKey:
    if not isinstance(key, HeadKey):
        raise invalid(f"after must be a HeadKey, not {type_name(key)}")
    return HeadKey(
        check_time(key.ready_at, "after.ready_at"),
        check_session_id(key.session_id, limits),
        check_index(key.index),
        check_name(key.consumer, "consumer name", limits),
        "" if key.lane == "" else check_name(key.lane, "lane name", limits),
    )


def check_heartbeat(beat: object, *, limits: Limits) -> WorkerBeat:
    """A ``WorkerBeat``: names within ``Limits.max_name_length`` (holder, host, version and
    each consumer, no name twice), counts non-negative ints, ``started_at`` an aware
    datetime, ``interval`` a duration. Comes back with ``consumers`` as a tuple."""
    if not isinstance(beat, WorkerBeat):
        raise invalid(f"beat must be a WorkerBeat, not {type_name(beat)}")
    listed = items(beat.consumers, "consumers", limit=limits.max_consumers, setting="max_consumers")
    consumers = tuple(check_name(name, "consumer name", limits) for name in listed)
    if len(set(consumers)) != len(consumers):
        raise invalid("consumers names the same consumer more than once")
    return WorkerBeat(
        holder=check_holder(beat.holder, limits),
        host=check_name(beat.host, "worker host", limits),
        pid=check_natural(beat.pid, "pid", maximum=MAX_ATTEMPT),
        consumers=consumers,
        concurrency=check_natural(beat.concurrency, "concurrency", maximum=MAX_ATTEMPT),
        started_at=check_time(beat.started_at, "started_at"),
        in_flight=check_natural(beat.in_flight, "in_flight", maximum=MAX_ATTEMPT),
        version=check_name(beat.version, "worker version", limits),
        interval=check_seconds(beat.interval, "heartbeat interval", limits),
        completed=check_natural(beat.completed, "completed", maximum=MAX_INDEX),
        failed=check_natural(beat.failed, "failed", maximum=MAX_INDEX),
    )


def check_forget_workers(holders: object, *, limits: Limits) -> list[str]:
    """The holders whose rows go: at most ``Limits.max_page_size`` of them."""
    listed = items(holders, "holders", limit=limits.max_page_size, setting="max_page_size")
    return [check_holder(holder, limits) for holder in listed]


@dataclass(frozen=True, slots=True)
class AuditArgs:
    """A checked ``record_audit``: the entry (its texts checked) and its detail as JSON text."""

    entry: AuditEntry
    detail_json: str


def check_record_audit(entry: object, *, limits: Limits) -> AuditArgs:
    """An ``AuditEntry`` without ``id`` and ``at`` (the store sets them): ``actor`` a name,
    ``action`` one of ``AUDIT_ACTIONS``, ``session_id``, ``consumer`` and ``lane`` None or
    as the other operations take them, ``index`` None or an index, ``detail`` a dict of JSON
    of at most ``Limits.max_presence_value_bytes`` (the bound of small JSON values)."""
    if not isinstance(entry, AuditEntry):
        raise invalid(f"entry must be an AuditEntry, not {type_name(entry)}")
    if entry.id is not None or entry.at is not None:
        raise invalid("an audit entry's id and at are the store's to set: leave them None")
    actor = check_name(entry.actor, "audit actor", limits)
    if not isinstance(entry.action, str) or entry.action not in AUDIT_ACTIONS:
        known = ", ".join(AUDIT_ACTIONS)
        raise invalid(f"audit action must be one of {known}, got {show(entry.action)}")
    session = entry.session_id
    session = None if session is None else check_session_id(session, limits)
    consumer = entry.consumer
    consumer = None if consumer is None else check_name(consumer, "consumer name", limits)
    lane = check_lane(entry.lane, limits)
    index = None if entry.index is None else check_index(entry.index)
    if not isinstance(entry.detail, dict):
        raise invalid(f"audit detail must be a dict, not {type_name(entry.detail)}")
    detail_json, _ = encode_json(
        entry.detail,
        "audit detail",
        limits,
        max_bytes=limits.max_presence_value_bytes,
        setting="max_presence_value_bytes",
    )
    checked = AuditEntry(actor, entry.action, session, consumer, lane, index, entry.detail)
    return AuditArgs(checked, detail_json)


@dataclass(frozen=True, slots=True)
class AuditLogArgs:
    after: str | None
    """The id of the last entry of the previous page (None: the newest first)."""
    limit: int


def check_audit_log(*, after: object, limit: object, limits: Limits) -> AuditLogArgs:
    """``after`` None or an id as long as event ids may be, ``limit`` in [1,
    ``Limits.max_page_size``]."""
    checked = None
    if after is not None:
        checked = check_text(
            after,
            "after",
            max_length=limits.max_id_length,
            setting="max_id_length",
            max_bytes=limits.max_id_bytes,
            bytes_setting="max_id_bytes",
        )
    count = check_count(limit, "limit", maximum=limits.max_page_size, setting="max_page_size")
    return AuditLogArgs(checked, count)


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
    """At most ``Limits.max_presence_fields`` fields, each value (and ``seen``) at most
    ``Limits.max_presence_value_bytes``, all within ``Limits.max_call_bytes``; ``at`` in
    [EARLIEST_TIME, LATEST_TIME), returned in UTC."""
    checked_ns = check_name(ns, "presence namespace", limits)
    who = check_name(participant, "presence participant", limits)
    if not isinstance(values, Mapping):
        raise invalid(f"presence values must be a mapping, not {type_name(values)}")
    listed = items(
        tuple(islice(values.items(), limits.max_presence_fields + 1)),  # a mapping: no drain
        "presence values",
        limit=limits.max_presence_fields,
        setting="max_presence_fields",
    )
    budget = CallBudget(limits)
    encoded: dict[str, str] = {}
    for pair in listed:
        field, value = cast(tuple[object, JSON], pair)
        encoded[check_name(field, "presence field", limits)] = _presence_json(
            value, "presence value", limits, budget
        )
    seen_json = _presence_json(seen, "presence seen", limits, budget)
    return PresenceWriteArgs(
        checked_ns,
        who,
        encoded,
        seen_json,
        check_time(at, "presence at"),
        check_seconds(ttl, "presence ttl", limits),
    )


def _presence_json(value: JSON, what: str, limits: Limits, budget: CallBudget) -> str:
    text, size = encode_json(
        value,
        what,
        limits,
        max_bytes=limits.max_presence_value_bytes,
        setting="max_presence_value_bytes",
    )
    budget.spend_bytes(size)
    return text


def check_presence_read(ns: object, *, limits: Limits) -> str:
    return check_name(ns, "presence namespace", limits)
