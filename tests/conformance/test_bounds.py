"""One test per input that used to escape the contract's bounds: refused alike, nothing written."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast, overload

import pytest

from a2pg import (
    A2Error,
    AttemptRef,
    ClaimRef,
    Completed,
    Completion,
    Consumer,
    LogSpec,
    NewEvent,
    SnapshotWrite,
    Superseded,
    Target,
    WorkerBeat,
)
from a2pg.contract import DEFAULT_LIMITS
from a2pg.contract.limits import EARLIEST_TIME, LATEST_TIME, MAX_ATTEMPT, MAX_INDEX
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import HOLDER, TTL, assert_code, claim, ev, fingerprint
from .invalid_support import prepare, refused

Op = Callable[[Store], Awaitable[Any]]

YEAR_11533_TTL = 3e11
"""The ``ttl`` that leased a head until the year 11533."""

FAR_SECONDS: dict[str, Any] = {
    "3e11": YEAR_11533_TTL,
    "max+1": DEFAULT_LIMITS.max_seconds + 1,
    "1e20": 1e20,
    "1e308": 1e308,
    "10**400": 10**400,
}


def _seconds_ops(seconds: Any) -> dict[str, Op]:
    return {
        "claim_available": lambda s: s.claim_available("s", holder=HOLDER, ttl=seconds),
        "claim_any": lambda s: s.claim_any(holder=HOLDER, ttl=seconds),
        "renew_claims": lambda s: s.renew_claims(
            "s", holder=HOLDER, claims=[AttemptRef("c", None, 1, 1)], ttl=seconds
        ),
        "fail_attempt": lambda s: s.fail_attempt(
            "s",
            consumer="c",
            lane=None,
            index=1,
            attempt=1,
            error="e",
            max_failures=3,
            retry_after=seconds,
        ),
    }


@pytest.mark.parametrize("op", list(_seconds_ops(0)))
@pytest.mark.parametrize("seconds", list(FAR_SECONDS))
async def test_a_duration_past_ten_years_is_refused(store: Store, op: str, seconds: str) -> None:
    before = await prepare(store)
    call = _seconds_ops(FAR_SECONDS[seconds])[op]
    await refused(store, before, lambda: call(store), "Limits.max_seconds")
    assert len(await store.cursors("s")) == 2


async def test_the_longest_duration_is_accepted_and_reads_back(store: Store) -> None:
    """A lease of ``Limits.max_seconds`` ends in a year every backend reads back."""
    await store.append("t", [ev(to=["c"])])
    [head] = await claim(store, "t", ttl=DEFAULT_LIMITS.max_seconds)
    [cursor] = await store.cursors("t")
    assert cursor.dispatch.claim_expires_at == head.dispatch.claim_expires_at
    expires = cursor.dispatch.claim_expires_at
    assert expires is not None and expires.year < 2100


PLUS_14 = timezone(timedelta(hours=14))
MINUS_14 = timezone(timedelta(hours=-14))

EXTREME_TIMES: dict[str, datetime] = {
    "year-1-plus-14h": datetime(1, 1, 1, 0, 0, tzinfo=PLUS_14),
    "year-1-utc": datetime(1, 1, 1, tzinfo=UTC),
    "year-9999-minus-14h": datetime(9999, 12, 31, 23, 59, tzinfo=MINUS_14),
    "year-9999-utc": datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    "just-before-1970": EARLIEST_TIME - timedelta(microseconds=1),
    "year-9000": LATEST_TIME,
    "naive": datetime(2026, 1, 1),
}


@pytest.mark.parametrize("name", list(EXTREME_TIMES))
async def test_an_extreme_presence_time_is_refused_and_reads_keep_working(
    store: Store, clock: FakeClock, name: str
) -> None:
    await store.presence.write("room", "ann", {"f": 1}, at=clock(), seen=None, ttl=60)
    before = await store.presence.read("room")
    with pytest.raises(A2Error) as error:
        await store.presence.write(
            "room", "bob", {"f": 2}, at=EXTREME_TIMES[name], seen=None, ttl=60
        )
    assert_code(error, "INVALID_ARGUMENT", "presence at")
    assert await store.presence.read("room") == before


@pytest.mark.parametrize(
    "at",
    [
        EARLIEST_TIME,
        LATEST_TIME - timedelta(microseconds=1),
        datetime(8999, 12, 31, 9, 59, tzinfo=MINUS_14),
    ],
    ids=["earliest", "latest", "latest-in-minus-14h"],
)
async def test_the_extreme_accepted_presence_times_read_back_in_utc(
    store: Store, at: datetime
) -> None:
    await store.presence.write("room", "ann", {"f": 1}, at=at, seen=None, ttl=60)
    [row] = await store.presence.read("room")
    assert row.at == at
    assert row.at.utcoffset() == timedelta(0)


async def test_a_one_gib_append_is_refused_quickly_by_the_call_byte_cap(store: Store) -> None:
    before = await prepare(store)
    payload = "x" * (DEFAULT_LIMITS.max_payload_bytes - 2)  # 1 MiB as JSON, shared by all
    batch = [NewEvent("big", payload) for _ in range(DEFAULT_LIMITS.max_batch_events)]
    started = time.monotonic()
    await refused(store, before, lambda: store.append("s", batch), "Limits.max_call_bytes")
    assert time.monotonic() - started < 5.0


async def test_a_hundred_thousand_returned_events_are_refused(store: Store) -> None:
    """1,000 completions of 101 events each: 101,101 writes in one call before the cap."""
    before = await prepare(store)
    returned = tuple(NewEvent("r", None, id=f"r{n}") for n in range(101))
    batch = [Completion(f"s{n}", "c", None, 1, 1, returned) for n in range(1_000)]
    started = time.monotonic()
    await refused(store, before, lambda: store.complete_attempts(batch), "Limits.max_call_events")
    assert time.monotonic() - started < 5.0


async def test_the_largest_attempt_and_index_are_answered(store: Store) -> None:
    await prepare(store)
    assert await store.read("s", after=MAX_INDEX) == []
    assert len(await store.read("s", through=MAX_INDEX, limit=MAX_INDEX)) == 2
    result = await store.complete_attempt(
        "s", consumer="c", lane=None, index=1, attempt=MAX_ATTEMPT
    )
    assert result == Superseded()
    outcome = await store.fail_attempt(
        "s",
        consumer="c",
        lane=None,
        index=1,
        attempt=MAX_ATTEMPT,
        error="e",
        max_failures=MAX_ATTEMPT,
    )
    assert outcome.outcome == "superseded"
    assert not (await store.redrive("s", consumer="c", index=MAX_INDEX, action="retry")).redriven
    assert not (await store.clear("s", if_last_index=MAX_INDEX)).cleared


PAST_RANGE: dict[str, Op] = {
    "complete-attempt-2**31": lambda s: s.complete_attempt(
        "s", consumer="c", lane=None, index=1, attempt=2**31
    ),
    "fail-attempt-2**31": lambda s: s.fail_attempt(
        "s", consumer="c", lane=None, index=1, attempt=2**31, error="e", max_failures=3
    ),
    "fail-max-failures-2**31": lambda s: s.fail_attempt(
        "s", consumer="c", lane=None, index=1, attempt=1, error="e", max_failures=2**31
    ),
    "renew-attempt-2**31": lambda s: s.renew_claims(
        "s", holder=HOLDER, claims=[AttemptRef("c", None, 1, 2**31)], ttl=TTL
    ),
    "cause-attempt-2**31": lambda s: s.append("s", [ev(cause=AttemptRef("c", None, 1, 2**31))]),
    "complete-index-2**63": lambda s: s.complete_attempt(
        "s", consumer="c", lane=None, index=2**63, attempt=1
    ),
    "redrive-index-2**63": lambda s: s.redrive("s", consumer="c", index=2**63, action="skip"),
    "origin-index-2**63": lambda s: s.append("s", [ev()], origin_index=2**63),
    "read-after-2**63": lambda s: s.read("s", after=2**63),
    "read-through-2**63": lambda s: s.read("s", through=2**63),
    "read-limit-2**63": lambda s: s.read("s", limit=2**63),
    "claim-through-2**63": lambda s: s.claim_available("s", holder=HOLDER, ttl=TTL, through=2**63),
    "exclude-index-2**63": lambda s: s.claim_available(
        "s", holder=HOLDER, ttl=TTL, exclude=[ClaimRef("c", None, 2**63)]
    ),
    "clear-if-last-2**63": lambda s: s.clear("s", if_last_index=2**63),
    "snapshot-index-2**63": lambda s: s.put_snapshots("s", "r", [SnapshotWrite(2**63, 1)]),
    "pin-index-2**63": lambda s: s.put_snapshots(
        "s", "r", [SnapshotWrite(1, 1, pins=[ClaimRef("c", None, 2**63)])]
    ),
    "read-state-through-2**63": lambda s: s.read_state("s", "r", through=2**63),
    "stream-after-2**63": lambda s: _stream(s, after=2**63),
}


async def _stream(store: Store, *, after: int) -> None:
    store.stream("s", after=after)


@pytest.mark.parametrize("name", list(PAST_RANGE))
async def test_attempts_from_2_31_and_indexes_from_2_63_are_refused(
    store: Store, name: str
) -> None:
    before = await prepare(store)
    await refused(store, before, lambda: PAST_RANGE[name](store), "between")


NOT_SEQUENCES: dict[str, Any] = {"none": None, "int": 3, "str": "c", "bytes": b"c", "dict": {}}

SEQUENCE_OPS: dict[str, Callable[[Store, Any], Awaitable[Any]]] = {
    "exclude": lambda s, v: s.claim_available("s", holder=HOLDER, ttl=TTL, exclude=v),
    "renew-claims": lambda s, v: s.renew_claims("s", holder=HOLDER, claims=v, ttl=TTL),
    "release-claims": lambda s, v: s.release_claims("s", holder=HOLDER, claims=v),
    "pins": lambda s, v: s.put_snapshots("s", "r", [SnapshotWrite(1, 1, pins=v)]),
    "writes": lambda s, v: s.put_snapshots("s", "r", v),
    "events": lambda s, v: s.append("s", v),
    "targets": lambda s, v: s.append("s", [NewEvent("t", targets=v)]),
    "returned-events": lambda s, v: s.complete_attempt(
        "s", consumer="c", lane=None, index=1, attempt=1, events=v
    ),
    "completions": lambda s, v: s.complete_attempts(v),
    "register": lambda s, v: s.register_consumers(v),
    "unregister": lambda s, v: s.unregister_consumers(v),
    "read-types": lambda s, v: s.read("s", types=v),
    "log-types": lambda s, v: s.register_consumers([Consumer("a", LogSpec(types=v))]),
}


NONE_MEANS_ALL = {"read-types", "log-types"}
"""Where None is a valid value: every type."""


def _nothing() -> Iterator[Any]:
    yield from ()


ITERABLES: dict[str, Callable[[], Any]] = {
    "empty-generator": _nothing,
    "empty-iterator": lambda: iter([]),
    "empty-set": set,
    "empty-frozenset": frozenset,
    "dict-keys": lambda: {}.keys(),
    "memoryview": lambda: memoryview(b""),
}
"""Iterables that are no ``Sequence``, all empty: nothing in them to refuse but their kind.
Each op's types say ``Sequence``; an iterator would also be used up by a retry."""

SEQUENCE_TYPED_OPS: dict[str, Callable[[Store, Any], Awaitable[Any]]] = {
    **SEQUENCE_OPS,
    "append-consumers": lambda s, v: s.append("s", [ev()], consumers=v),
    "claim-consumers": lambda s, v: s.claim_available("s", holder=HOLDER, ttl=TTL, consumers=v),
    "claim-any-consumers": lambda s, v: s.claim_any(holder=HOLDER, ttl=TTL, consumers=v),
    "complete-consumers": lambda s, v: s.complete_attempt(
        "s", consumer="c", lane=None, index=1, attempt=1, consumers=v
    ),
    "complete-and-claim": lambda s, v: s.complete_and_claim(v, holder=HOLDER, ttl=TTL),
    "complete-and-claim-consumers": lambda s, v: s.complete_and_claim(
        [], holder=HOLDER, ttl=TTL, consumers=v
    ),
    "redrive-consumers": lambda s, v: s.redrive(
        "s", consumer="c", index=1, action="skip", consumers=v
    ),
    "forget-workers": lambda s, v: s.forget_workers(v),
    "beat-consumers": lambda s, v: s.heartbeat(
        WorkerBeat(
            holder="w-1",
            host="box",
            pid=42,
            consumers=v,
            concurrency=1,
            started_at=datetime(2026, 1, 1, tzinfo=UTC),
            in_flight=0,
            version="0.1.0",
            interval=5.0,
        )
    ),
}
"""Every parameter the types say is a ``Sequence`` (or a tuple), by the op that takes it."""


@pytest.mark.parametrize("kind", list(ITERABLES))
@pytest.mark.parametrize("op", list(SEQUENCE_TYPED_OPS))
async def test_an_iterable_that_is_no_sequence_is_refused(store: Store, op: str, kind: str) -> None:
    """``complete_attempts(<empty generator>)`` once answered ``[]``: every parameter typed
    ``Sequence`` now takes sequences only, on every backend."""
    before = await prepare(store)
    value = ITERABLES[kind]()
    await refused(store, before, lambda: SEQUENCE_TYPED_OPS[op](store, value), "must be a sequence")


@pytest.mark.parametrize(
    ("op", "kind"),
    [
        (op, kind)
        for op in SEQUENCE_OPS
        for kind in NOT_SEQUENCES
        if not (kind == "none" and op in NONE_MEANS_ALL)
    ],
)
async def test_a_non_sequence_where_a_sequence_is_expected_is_refused(
    store: Store, op: str, kind: str
) -> None:
    before = await prepare(store)
    value = NOT_SEQUENCES[kind]
    await refused(store, before, lambda: SEQUENCE_OPS[op](store, value), "sequence")


class Endless(Sequence[ClaimRef]):
    """A sequence as long as its reader reads: its length says more than any limit."""

    def __len__(self) -> int:
        return 2**62

    @overload
    def __getitem__(self, index: int) -> ClaimRef: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[ClaimRef]: ...
    def __getitem__(self, index: int | slice) -> ClaimRef | Sequence[ClaimRef]:
        if isinstance(index, slice):
            raise AssertionError("an endless sequence was sliced")
        return ClaimRef("c", None, 1)


async def test_an_endless_iterable_is_refused_without_being_drained(store: Store) -> None:
    before = await prepare(store)

    def endless() -> Any:
        while True:
            yield ClaimRef("c", None, 1)

    await refused(
        store,
        before,
        lambda: store.claim_available("s", holder=HOLDER, ttl=TTL, exclude=endless()),
        "must be a sequence",
    )
    await refused(
        store,
        before,
        lambda: store.claim_available("s", holder=HOLDER, ttl=TTL, exclude=Endless()),
        "Limits.max_claims",
    )


def _deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


HOSTILE_VALUES: dict[str, Any] = {
    "deep-list": _deep(100_000),
    "huge-int": 10**100_000,
    "huge-str": "x" * 10_000_000,
    "huge-dict": dict.fromkeys((str(n) for n in range(100_000)), "x" * 100),
    "huge-bytes": b"x" * 10_000_000,
}

QUOTING_OPS: dict[str, Callable[[Store, Any], Awaitable[Any]]] = {
    "max_failures": lambda s, v: s.fail_attempt(
        "s", consumer="c", lane=None, index=1, attempt=1, error="e", max_failures=v
    ),
    "ttl": lambda s, v: s.claim_available("s", holder=HOLDER, ttl=v),
    "action": lambda s, v: s.redrive("s", consumer="c", index=1, action=v),
    "redrive-lane": lambda s, v: s.redrive("s", consumer="c", index=1, action="skip", lane=v),
    "index": lambda s, v: s.complete_attempt("s", consumer="c", lane=None, index=v, attempt=1),
    "limit": lambda s, v: s.claim_any(holder=HOLDER, ttl=TTL, limit=v),
    "presence-at": lambda s, v: s.presence.write("room", "ann", {"f": 1}, at=v, seen=None, ttl=1),
    "payload": lambda s, v: s.append("s", [NewEvent("t", {"k": v})]),
    "snapshot-state": lambda s, v: s.put_snapshots("s", "r", [SnapshotWrite(1, v)]),
}


@pytest.mark.parametrize("value", list(HOSTILE_VALUES))
@pytest.mark.parametrize("op", list(QUOTING_OPS))
async def test_deep_and_huge_values_give_short_messages(store: Store, op: str, value: str) -> None:
    before = await prepare(store)
    with pytest.raises(A2Error) as error:
        await QUOTING_OPS[op](store, HOSTILE_VALUES[value])
    assert_code(error, "INVALID_ARGUMENT")
    assert len(str(error.value)) < 400, str(error.value)[:400]
    assert await fingerprint(store, "s") == before


async def test_log_types_given_as_a_list_come_back_as_a_tuple(store: Store) -> None:
    spec = LogSpec("log", cast(Any, ["a", "b"]))
    await store.register_consumers([Consumer("audit", spec)])
    [registered] = await store.registered_consumers()
    assert registered.log == LogSpec("log", ("a", "b"))
    assert isinstance(registered.log.types, tuple)


async def test_targets_given_as_a_generator_are_refused(store: Store) -> None:
    before = await prepare(store)
    targets = (Target(name) for name in ("c", "d"))
    event = NewEvent("t", targets=cast(Any, targets))
    await refused(store, before, lambda: store.append("s", [event]), "event targets", "sequence")


async def test_a_completion_with_generator_events_is_refused(store: Store) -> None:
    await store.append("g", [ev(to=["c"])])
    [head] = await claim(store, "g")
    before = await prepare(store)
    events = (ev("r", id=f"r{n}") for n in range(2))
    completion = Completion("g", "c", None, head.index, head.attempt, cast(Any, events))
    await refused(store, before, lambda: store.complete_attempts([completion]), "sequence")
    [cursor] = await store.cursors("g")
    assert cursor.dispatch.claim_holder == HOLDER  # still claimed: nothing was completed


async def test_a_completion_with_events_in_a_deque_is_stored_as_checked(store: Store) -> None:
    await store.append("g", [ev(to=["c"])])
    [head] = await claim(store, "g")
    events = deque(ev("r", id=f"r{n}") for n in range(2))
    result = await store.complete_attempts(
        [Completion("g", "c", None, head.index, head.attempt, events)]
    )
    assert isinstance(result[0], Completed)
    assert [e.id for e in result[0].events] == ["r0", "r1"]
