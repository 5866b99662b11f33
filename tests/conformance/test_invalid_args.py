"""Bad indexes, durations, names, actions and specs: INVALID_ARGUMENT before anything is written."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, cast

import pytest

from a2pg import A2Error, AttemptRef, ClaimRef, Consumer, LogSpec, SnapshotWrite
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import HOLDER, TTL, assert_code, ev, log_consumer
from .invalid_support import LONG, prepare, refused

Op = Callable[[Store], Awaitable[Any]]


def _complete(**changes: Any) -> Op:
    args: dict[str, Any] = {"consumer": "c", "lane": None, "index": 1, "attempt": 1, "events": []}
    args.update(changes)
    return lambda s: s.complete_attempt("s", **args)


def _fail(**changes: Any) -> Op:
    args: dict[str, Any] = {
        "consumer": "c",
        "lane": None,
        "index": 1,
        "attempt": 1,
        "error": "e",
        "max_failures": 3,
    }
    args.update(changes)
    return lambda s: s.fail_attempt("s", **args)


def _claim(**changes: Any) -> Op:
    args: dict[str, Any] = {"holder": HOLDER, "ttl": TTL}
    args.update(changes)
    return lambda s: s.claim_available("s", **args)


def _claim_any(**changes: Any) -> Op:
    args: dict[str, Any] = {"holder": HOLDER, "ttl": TTL}
    args.update(changes)
    return lambda s: s.claim_any(**args)


def _renew(claims: list[Any] | None = None, **changes: Any) -> Op:
    args: dict[str, Any] = {
        "holder": HOLDER,
        "claims": claims if claims is not None else [AttemptRef("c", None, 1, 1)],
        "ttl": TTL,
    }
    args.update(changes)
    return lambda s: s.renew_claims("s", **args)


def _redrive(**changes: Any) -> Op:
    args: dict[str, Any] = {"consumer": "c", "index": 1, "action": "retry"}
    args.update(changes)
    return lambda s: s.redrive("s", **args)


BAD_CALLS: dict[str, Op] = {
    "complete-index-zero": _complete(index=0),
    "complete-index-negative": _complete(index=-1),
    "complete-attempt-zero": _complete(attempt=0),
    "complete-index-bool": _complete(index=True),
    "complete-empty-consumer": _complete(consumer=""),
    "complete-nul-consumer": _complete(consumer="c\x00"),
    "complete-empty-lane": _complete(lane=""),
    "fail-index-zero": _fail(index=0),
    "fail-attempt-zero": _fail(attempt=0),
    "fail-attempt-negative": _fail(attempt=-3),
    "fail-max-failures-zero": _fail(max_failures=0),
    "fail-retry-after-negative": _fail(retry_after=-1),
    "fail-retry-after-nan": _fail(retry_after=math.nan),
    "fail-error-not-text": _fail(error=None),
    "fail-long-consumer": _fail(consumer="c" * LONG),
    "redrive-index-zero": _redrive(index=0),
    "redrive-unknown-action": _redrive(action="later"),
    "redrive-action-case": _redrive(action="RETRY"),
    "redrive-empty-action": _redrive(action=""),
    "redrive-empty-consumer": _redrive(consumer=""),
    "redrive-lane-int": _redrive(lane=1),
    "redrive-empty-lane": _redrive(lane=""),
    "redrive-nul-lane": _redrive(lane="x\x00"),
    "redrive-long-lane": _redrive(lane="x" * LONG),
    "claim-ttl-zero": _claim(ttl=0),
    "claim-ttl-negative": _claim(ttl=-5),
    "claim-ttl-nan": _claim(ttl=math.nan),
    "claim-ttl-infinite": _claim(ttl=math.inf),
    "claim-empty-holder": _claim(holder=""),
    "claim-nul-holder": _claim(holder="w\x00"),
    "claim-exclude-index-zero": _claim(exclude=[ClaimRef("c", None, 0)]),
    "claim-through-negative": _claim(through=-1),
    "claim-max-failures-zero": _claim(max_failures=0),
    "claim-duplicate-consumers": _claim(consumers=[Consumer("c"), Consumer("c")]),
    "claim-empty-consumer-name": _claim(consumers=[Consumer("")]),
    "claim-empty-log-lane": _claim(consumers=[Consumer("a", LogSpec(lane=""))]),
    "claim-empty-log-type": _claim(consumers=[Consumer("a", LogSpec(types=("",)))]),
    "claim-nul-log-type": _claim(consumers=[Consumer("a", LogSpec(types=("t\x00",)))]),
    "claim-any-ttl-zero": _claim_any(ttl=0),
    "claim-any-empty-holder": _claim_any(holder=""),
    "claim-any-limit-zero": _claim_any(limit=0),
    "claim-any-limit-negative": _claim_any(limit=-1),
    "claim-any-max-failures-zero": _claim_any(max_failures=0),
    "renew-ttl-zero": _renew(ttl=0),
    "renew-empty-holder": _renew(holder=""),
    "renew-index-zero": _renew([AttemptRef("c", None, 0, 1)]),
    "renew-attempt-zero": _renew([AttemptRef("c", None, 1, 0)]),
    "renew-not-a-ref": _renew([ClaimRef("c", None, 1)]),
    "append-origin-zero": lambda s: s.append("s", [ev()], origin_index=0),
    "append-origin-negative": lambda s: s.append("s", [ev()], origin_index=-2),
    "read-after-negative": lambda s: s.read("s", after=-1),
    "read-through-negative": lambda s: s.read("s", through=-1),
    "read-limit-negative": lambda s: s.read("s", limit=-1),
    "read-types-nul": lambda s: s.read("s", types=["a\x00"]),
    "read-types-string": lambda s: s.read("s", types="a"),
    "read-state-through-negative": lambda s: s.read_state("s", "r", through=-1),
    "read-state-empty-reducer": lambda s: s.read_state("s", ""),
    "snapshot-index-zero": lambda s: s.put_snapshots("s", "r", [SnapshotWrite(0, 1)]),
    "snapshot-state-nan": lambda s: s.put_snapshots("s", "r", [SnapshotWrite(1, math.nan)]),
    "snapshot-state-set": lambda s: s.put_snapshots("s", "r", [SnapshotWrite(1, {1})]),
    "snapshot-state-nul": lambda s: s.put_snapshots("s", "r", [SnapshotWrite(1, "\x00")]),
    "snapshot-pin-index-zero": lambda s: s.put_snapshots(
        "s", "r", [SnapshotWrite(1, 1, pins=[ClaimRef("c", None, 0)])]
    ),
    "snapshot-empty-reducer": lambda s: s.put_snapshots("s", "", [SnapshotWrite(1, 1)]),
    "clear-cause-index-zero": lambda s: s.clear("s", cause=AttemptRef("c", None, 0, 1)),
    "wake-log-targeted-consumer": lambda s: s.wake_log("s", Consumer("c")),
    "wake-log-empty-name": lambda s: s.wake_log("s", log_consumer("")),
    "register-empty-name": lambda s: s.register_consumers([log_consumer("")]),
    "register-duplicates": lambda s: s.register_consumers(
        [log_consumer("a"), log_consumer("a", types=["x"])]
    ),
    "register-nul-type": lambda s: s.register_consumers([log_consumer("a", types=["\x00"])]),
    "unregister-empty-name": lambda s: s.unregister_consumers([""]),
    "unregister-a-string": lambda s: s.unregister_consumers("audit"),
    "wake-log-not-a-consumer": lambda s: s.wake_log("s", cast(Any, "audit")),
    "complete-attempts-not-a-sequence": lambda s: s.complete_attempts(cast(Any, None)),
    "complete-attempts-not-completions": lambda s: s.complete_attempts(
        cast(Any, [("s", "c", None, 1, 1)])
    ),
    "snapshot-index-past-head": lambda s: s.put_snapshots("s", "r", [SnapshotWrite(9, 1)]),
    "sessions-limit-zero": lambda s: s.sessions(limit=0),
    "sessions-after-nul": lambda s: s.sessions(after="a\x00"),
    "append-duplicate-consumers": lambda s: s.append(
        "s", [ev()], consumers=[Consumer("x"), Consumer("x")]
    ),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
async def test_bad_arguments_are_refused(store: Store, name: str) -> None:
    before = await prepare(store)
    await refused(store, before, lambda: BAD_CALLS[name](store))


async def test_a_redrive_action_error_names_the_choices(store: Store) -> None:
    before = await prepare(store)
    await refused(store, before, lambda: _redrive(action="later")(store), "retry", "skip")


async def test_an_over_long_name_names_the_setting(store: Store) -> None:
    before = await prepare(store)
    await refused(store, before, lambda: _claim(holder="h" * LONG)(store), "Limits.max_name_length")


async def test_wake_log_of_a_consumer_with_a_targeted_lane_is_refused(store: Store) -> None:
    before = await prepare(store)
    await refused(store, before, lambda: store.wake_log("s", log_consumer("d", lane="x")), "d")


async def test_a_failing_registration_registers_nothing(store: Store) -> None:
    before = await prepare(store)
    batch = [log_consumer("good"), log_consumer("bad", lane="")]
    await refused(store, before, lambda: store.register_consumers(batch))
    assert await store.registered_consumers() == []


NS = "room"


async def _presence_unchanged(store: Store, call: Callable[[], Awaitable[Any]]) -> None:
    before = await store.presence.read(NS)
    with pytest.raises(A2Error) as error:
        await call()
    assert_code(error, "INVALID_ARGUMENT")
    assert await store.presence.read(NS) == before


BAD_PRESENCE: dict[str, dict[str, Any]] = {
    "empty-ns": {"ns": ""},
    "nul-ns": {"ns": "r\x00"},
    "empty-participant": {"participant": ""},
    "nul-participant": {"participant": "p\x00"},
    "long-participant": {"participant": "p" * LONG},
    "empty-field": {"values": {"": 1}},
    "values-not-a-mapping": {"values": [("f", 1)]},
    "nul-field": {"values": {"f\x00": 1}},
    "non-str-field": {"values": {1: 1}},
    "value-nan": {"values": {"f": math.nan}},
    "value-set": {"values": {"f": {1}}},
    "value-nul": {"values": {"f": "\x00"}},
    "seen-not-json": {"seen": object()},
    "seen-nul": {"seen": "\x00"},
    "ttl-zero": {"ttl": 0},
    "ttl-negative": {"ttl": -1},
    "naive-at": {"at": datetime(2026, 1, 1)},
}


@pytest.mark.parametrize("name", list(BAD_PRESENCE))
async def test_bad_presence_writes_are_refused(store: Store, clock: FakeClock, name: str) -> None:
    await store.presence.write(NS, "ann", {"f": 1, "g": 2}, at=clock(), seen="s", ttl=60)
    args: dict[str, Any] = {
        "ns": NS,
        "participant": "ann",
        "values": {"g": 3, "f": 4},
        "at": clock(),
        "seen": "s",
        "ttl": 60,
    }
    args.update(BAD_PRESENCE[name])
    await _presence_unchanged(
        store,
        lambda: store.presence.write(
            args["ns"],
            args["participant"],
            args["values"],
            at=args["at"],
            seen=args["seen"],
            ttl=args["ttl"],
        ),
    )


@pytest.mark.parametrize("ns", ["", "r\x00"], ids=["empty", "nul"])
async def test_bad_presence_reads_are_refused(store: Store, ns: str) -> None:
    with pytest.raises(A2Error) as error:
        await store.presence.read(ns)
    assert_code(error, "INVALID_ARGUMENT")
