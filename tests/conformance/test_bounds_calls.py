"""Every per-call and per-value limit of ``Limits``, on small settings: at the limit a call is
taken; one past, it is refused naming the setting, and nothing is written."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from a2pg import (
    A2Error,
    AttemptRef,
    ClaimRef,
    Completion,
    Consumer,
    Limits,
    LogSpec,
    NewEvent,
    SnapshotWrite,
    Target,
)
from a2pg.contract.limits import INDEX_KEY_BUDGET
from a2pg.store import Store

from .helpers import HOLDER, TTL, assert_code
from .invalid_support import prepare, refused

SMALL = Limits(
    max_json_depth=3,
    max_payload_bytes=64,
    max_state_bytes=64,
    max_presence_value_bytes=16,
    max_batch_events=4,
    max_call_events=6,
    max_call_bytes=100,
    max_targets=3,
    max_completions=3,
    max_snapshot_writes=2,
    max_pins=2,
    max_presence_fields=2,
    max_log_types=2,
    max_consumers=2,
    max_claims=2,
    max_claim_limit=5,
    max_page_size=100,
    max_seconds=100.0,
)
AT = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def limits() -> Limits:
    return SMALL


Op = Callable[[Store], Awaitable[Any]]


def _events(count: int, payload: Any = None, **options: Any) -> list[NewEvent]:
    return [NewEvent("t", payload, **options) for _ in range(count)]


def _returning(count: int, session: str = "x") -> Completion:
    return Completion(session, "c", None, 1, 1, [NewEvent("r", id=f"r{n}") for n in range(count)])


def _claims(count: int) -> list[AttemptRef]:
    return [AttemptRef("c", None, n, 1) for n in range(1, count + 1)]


def _logs(count: int, types: int = 1) -> list[Consumer]:
    return [
        Consumer(f"log{n}", LogSpec(f"lane{n}", tuple(f"t{k}" for k in range(types))))
        for n in range(count)
    ]


def _presence(values: dict[str, Any], seen: Any = None, ttl: float = 1) -> Op:
    return lambda s: s.presence.write("room", "ann", values, at=AT, seen=seen, ttl=ttl)


def _nest(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


PAST: dict[str, tuple[str, Op]] = {
    "payload": ("max_payload_bytes", lambda s: s.append("s", _events(1, "x" * 63))),
    "depth": ("max_json_depth", lambda s: s.append("s", _events(1, _nest(4)))),
    "batch": ("max_batch_events", lambda s: s.append("s", _events(5))),
    "append-bytes": ("max_call_bytes", lambda s: s.append("s", _events(3, "x" * 50))),
    "completion-events": ("max_batch_events", lambda s: s.complete_attempts([_returning(5)])),
    "call-events": (
        "max_call_events",
        lambda s: s.complete_attempts([_returning(4, "x"), _returning(3, "y")]),
    ),
    "completion-bytes": (
        "max_call_bytes",
        lambda s: s.complete_attempts(
            [Completion(n, "c", None, 1, 1, [NewEvent("r", "x" * 60, id="r")]) for n in "xyz"]
        ),
    ),
    "completions": (
        "max_completions",
        lambda s: s.complete_attempts([_returning(0, n) for n in "wxyz"]),
    ),
    "event-targets": (
        "max_targets",
        lambda s: s.append("s", _events(1, targets=[Target(f"c{n}") for n in range(4)])),
    ),
    "call-targets": (
        "max_targets",
        lambda s: s.append("s", _events(2, targets=[Target("e"), Target("f")])),
    ),
    "snapshot-writes": (
        "max_snapshot_writes",
        lambda s: s.put_snapshots("s", "r", [SnapshotWrite(1, n) for n in range(3)]),
    ),
    "state": ("max_state_bytes", lambda s: s.put_snapshots("s", "r", [SnapshotWrite(1, "x" * 63)])),
    "snapshot-bytes": (
        "max_call_bytes",
        lambda s: s.put_snapshots(
            "s", "r", [SnapshotWrite(1, "x" * 60), SnapshotWrite(2, "y" * 60)]
        ),
    ),
    "write-pins": (
        "max_pins",
        lambda s: s.put_snapshots(
            "s", "r", [SnapshotWrite(1, 1, pins=[ClaimRef("c", None, n) for n in (1, 2, 3)])]
        ),
    ),
    "call-pins": (
        "max_pins",
        lambda s: s.put_snapshots(
            "s",
            "r",
            [
                SnapshotWrite(1, 1, pins=[ClaimRef("c", None, 1), ClaimRef("d", "x", 2)]),
                SnapshotWrite(2, 2, pins=[ClaimRef("c", None, 1)]),
            ],
        ),
    ),
    "presence-fields": ("max_presence_fields", _presence({"a": 1, "b": 2, "c": 3})),
    "presence-value": ("max_presence_value_bytes", _presence({"a": "x" * 15})),
    "presence-seen": ("max_presence_value_bytes", _presence({"a": 1}, seen="x" * 15)),
    "presence-ttl": ("max_seconds", _presence({"a": 1}, ttl=100.5)),
    "register-types": ("max_log_types", lambda s: s.register_consumers(_logs(1, types=3))),
    "register-consumers": ("max_consumers", lambda s: s.register_consumers(_logs(3))),
    "append-consumers": ("max_consumers", lambda s: s.append("s", _events(1), consumers=_logs(3))),
    "append-consumer-bytes": (
        "max_call_bytes",
        lambda s: s.append(
            "s",
            _events(1),
            consumers=[
                Consumer("a", LogSpec(types=("x" * 70,))),
                Consumer("b", LogSpec(types=("y" * 70,))),
            ],
        ),
    ),
    "wake-log-types": ("max_log_types", lambda s: s.wake_log("s", _logs(1, types=3)[0])),
    "read-types": ("max_log_types", lambda s: s.read("s", types=["a", "b", "c"])),
    "claim-consumers": (
        "max_consumers",
        lambda s: s.claim_available("s", holder=HOLDER, ttl=TTL, consumers=_logs(3)),
    ),
    "claim-any-consumers": (
        "max_consumers",
        lambda s: s.claim_any(holder=HOLDER, ttl=TTL, consumers=_logs(3)),
    ),
    "redrive-consumers": (
        "max_consumers",
        lambda s: s.redrive("s", consumer="c", index=1, action="retry", consumers=_logs(3)),
    ),
    "unregister": ("max_consumers", lambda s: s.unregister_consumers(["a", "b", "c"])),
    "renew": (
        "max_claims",
        lambda s: s.renew_claims("s", holder=HOLDER, claims=_claims(3), ttl=TTL),
    ),
    "release": ("max_claims", lambda s: s.release_claims("s", holder=HOLDER, claims=_claims(3))),
    "exclude": (
        "max_claims",
        lambda s: s.claim_available(
            "s", holder=HOLDER, ttl=TTL, exclude=[ClaimRef("c", None, n) for n in (1, 2, 3)]
        ),
    ),
    "claim-any-limit": ("max_claim_limit", lambda s: s.claim_any(holder=HOLDER, ttl=TTL, limit=6)),
    "sessions-limit": ("max_page_size", lambda s: s.sessions(limit=101)),
    "claim-ttl": ("max_seconds", lambda s: s.claim_available("s", holder=HOLDER, ttl=100.5)),
    "renew-ttl": (
        "max_seconds",
        lambda s: s.renew_claims("s", holder=HOLDER, claims=_claims(1), ttl=101),
    ),
    "retry-after": (
        "max_seconds",
        lambda s: s.fail_attempt(
            "s",
            consumer="c",
            lane=None,
            index=1,
            attempt=1,
            error="e",
            max_failures=3,
            retry_after=1e9,
        ),
    ),
}


@pytest.mark.parametrize("name", list(PAST))
async def test_one_past_a_limit_is_refused_naming_its_setting(store: Store, name: str) -> None:
    setting, op = PAST[name]
    before = await prepare(store)
    presence = await store.presence.read("room")
    await refused(store, before, lambda: op(store), f"Limits.{setting}={getattr(SMALL, setting)}")
    assert await store.presence.read("room") == presence


AT_LIMIT: dict[str, Op] = {
    "payload": lambda s: s.append("t", _events(1, "x" * 62)),
    "depth": lambda s: s.append("t", _events(1, _nest(3))),
    "batch-and-bytes": lambda s: s.append("t", _events(4, "x" * 20)),
    "targets": lambda s: s.append("t", _events(1, targets=[Target(f"c{n}") for n in range(3)])),
    "completions": lambda s: s.complete_attempts(
        [
            Completion("s", "c", None, 1, 1, [NewEvent("r", id=f"a{n}") for n in range(2)]),
            Completion("s", "d", "x", 2, 1, [NewEvent("r", id=f"b{n}") for n in range(2)]),
            Completion("s", "d", "x", 2, 2, [NewEvent("r", id=f"c{n}") for n in range(2)]),
        ]
    ),
    "state-and-pins": lambda s: s.put_snapshots(
        "s",
        "r",
        [
            SnapshotWrite(1, "x" * 62, pins=[ClaimRef("c", None, 1)]),
            SnapshotWrite(2, 1, pins=[ClaimRef("d", "x", 2)]),
        ],
    ),
    "presence": _presence({"a": "x" * 14, "b": 1}, seen="y" * 14, ttl=100),
    "register": lambda s: s.register_consumers(_logs(2, types=2)),
    "read-types": lambda s: s.read("s", types=["a", "b"]),
    "renew": lambda s: s.renew_claims("s", holder=HOLDER, claims=_claims(2), ttl=100),
    "release": lambda s: s.release_claims("s", holder=HOLDER, claims=_claims(2)),
    "claim-any": lambda s: s.claim_any(holder=HOLDER, ttl=100, limit=5, consumers=_logs(2)),
    "sessions": lambda s: s.sessions(limit=100),
}


@pytest.mark.parametrize("name", list(AT_LIMIT))
async def test_a_call_at_its_limits_is_taken(store: Store, name: str) -> None:
    await prepare(store)
    await AT_LIMIT[name](store)


@pytest.mark.parametrize(
    "changes",
    [
        {"max_name_bytes": 700},
        {"max_session_id_bytes": 1_000, "max_id_bytes": 1_500},
        {"max_type_bytes": 3_000, "max_type_length": 1_000},
        {"max_claims": 0},
        {"max_payload_bytes": -1},
        {"max_batch_events": True},
        {"max_seconds": float("inf")},
        {"max_seconds": 1e12},
    ],
    ids=lambda changes: ",".join(changes),
)
def test_limits_that_would_break_the_store_are_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(A2Error) as error:
        Limits(**changes)
    assert_code(error, "INVALID_ARGUMENT", "Limits")


def test_the_default_widest_key_leaves_room() -> None:
    assert Limits().widest_key_bytes <= INDEX_KEY_BUDGET
