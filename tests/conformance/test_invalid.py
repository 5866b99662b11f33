"""Bad session ids and bad events: INVALID_ARGUMENT before anything is written."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from a2pg import AttemptRef, Completion, NewEvent, SnapshotWrite, Target
from a2pg.contract import DEFAULT_LIMITS
from a2pg.store import Store

from .helpers import HOLDER, TTL, close, ev, log_consumer, next_within
from .invalid_support import LONG, prepare, refused

LOG = log_consumer("audit")


async def _stream(store: Store, session_id: Any) -> Any:
    stream = store.stream(session_id)
    try:
        return await next_within(stream)
    finally:
        await close(stream)


SessionOp = Callable[[Store, Any], Awaitable[Any]]

SESSION_OPS: dict[str, SessionOp] = {
    "append": lambda s, sid: s.append(sid, [ev()]),
    "append-empty": lambda s, sid: s.append(sid, []),
    "read": lambda s, sid: s.read(sid),
    "wake_log": lambda s, sid: s.wake_log(sid, LOG),
    "cursors": lambda s, sid: s.cursors(sid),
    "claim_available": lambda s, sid: s.claim_available(sid, holder=HOLDER, ttl=TTL),
    "renew_claims": lambda s, sid: s.renew_claims(
        sid, holder=HOLDER, claims=[AttemptRef("c", None, 1, 1)], ttl=TTL
    ),
    "complete_attempt": lambda s, sid: s.complete_attempt(
        sid, consumer="c", lane=None, index=1, attempt=1, events=[]
    ),
    "complete_attempts": lambda s, sid: s.complete_attempts([Completion(sid, "c", None, 1, 1)]),
    "fail_attempt": lambda s, sid: s.fail_attempt(
        sid, consumer="c", lane=None, index=1, attempt=1, error="e", max_failures=3
    ),
    "dead_letters": lambda s, sid: s.dead_letters(sid),
    "redrive": lambda s, sid: s.redrive(sid, consumer="c", index=1, action="retry"),
    "read_state": lambda s, sid: s.read_state(sid, "r"),
    "put_snapshots": lambda s, sid: s.put_snapshots(sid, "r", [SnapshotWrite(1, 1)]),
    "clear": lambda s, sid: s.clear(sid),
    "reclaim": lambda s, sid: s.reclaim(sid),
    "stream": _stream,
}

BAD_SESSION_IDS: dict[str, tuple[Any, str]] = {
    "empty": ("", "empty"),
    "nul": ("s\x00", "NUL"),
    "lone-surrogate": ("s\ud800", "Unicode"),
    "over-long": ("s" * (DEFAULT_LIMITS.max_session_id_length + 1), "Limits.max_session_id_length"),
}


@pytest.mark.parametrize("op", list(SESSION_OPS))
@pytest.mark.parametrize("bad", list(BAD_SESSION_IDS))
async def test_bad_session_ids_are_refused(store: Store, op: str, bad: str) -> None:
    before = await prepare(store)
    session_id, fragment = BAD_SESSION_IDS[bad]
    await refused(store, before, lambda: SESSION_OPS[op](store, session_id), fragment)


@pytest.mark.parametrize("session_id", [None, 42, b"s"], ids=["none", "int", "bytes"])
async def test_session_ids_must_be_text(store: Store, session_id: Any) -> None:
    before = await prepare(store)
    await refused(store, before, lambda: store.append(session_id, [ev()]))


async def test_the_longest_session_id_is_accepted(store: Store) -> None:
    session_id = "s" * DEFAULT_LIMITS.max_session_id_length
    [event] = (await store.append(session_id, [ev()])).events
    assert event.session_id == session_id


class Opaque:
    """Something with no JSON form."""


BAD_PAYLOADS: dict[str, Any] = {
    "set": {1, 2},
    "bytes": b"raw",
    "nan": math.nan,
    "infinity": math.inf,
    "minus-infinity": -math.inf,
    "nested-nan": {"k": [1, math.nan]},
    "object": Opaque(),
    "datetime": datetime(2026, 1, 1, tzinfo=UTC),
    "complex": 1j,
    "int-key": {1: "x"},
    "nested-int-key": {"ok": {2: 3}},
    "tuple-key": {("a",): 1},
    "nul-in-string": "a\x00b",
    "nul-in-nested-string": ["ok", {"k": "\x00"}],
    "nul-in-key": {"a\x00": 1},
    "lone-surrogate": "a\ud800b",
    "lone-surrogate-in-key": {"\udfff": 1},
    "too-deep": None,
}


def _deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("name", list(BAD_PAYLOADS))
async def test_payloads_that_are_not_storable_json_are_refused(store: Store, name: str) -> None:
    before = await prepare(store)
    payload = (
        _deep(DEFAULT_LIMITS.max_json_depth + 10) if name == "too-deep" else BAD_PAYLOADS[name]
    )
    batch = [ev("fine"), NewEvent("bad", payload)]
    await refused(store, before, lambda: store.append("s", batch))


async def test_an_over_limit_payload_names_the_setting(store: Store) -> None:
    before = await prepare(store)
    payload = "x" * DEFAULT_LIMITS.max_payload_bytes
    await refused(
        store, before, lambda: store.append("s", [ev("big", payload)]), "Limits.max_payload_bytes"
    )


async def test_an_over_limit_batch_names_the_setting(store: Store) -> None:
    before = await prepare(store)
    batch = [ev() for _ in range(DEFAULT_LIMITS.max_batch_events + 1)]
    await refused(store, before, lambda: store.append("s", batch), "Limits.max_batch_events")


BAD_EVENTS: dict[str, tuple[NewEvent, str]] = {
    "empty-type": (NewEvent(""), "type"),
    "nul-type": (NewEvent("a\x00"), "NUL"),
    "long-type": (NewEvent("t" * LONG), "Limits.max_type_length"),
    "non-str-type": (NewEvent(None), "type"),  # type: ignore[arg-type]
    "empty-id": (NewEvent("t", id=""), "id"),
    "nul-id": (NewEvent("t", id="i\x00"), "NUL"),
    "long-id": (NewEvent("t", id="i" * LONG), "Limits.max_id_length"),
    "empty-target": (NewEvent("t", targets=(Target(""),)), "consumer"),
    "nul-target": (NewEvent("t", targets=(Target("c\x00"),)), "NUL"),
    "long-target": (NewEvent("t", targets=(Target("c" * LONG),)), "Limits.max_name_length"),
    "empty-lane": (NewEvent("t", targets=(Target("c", ""),)), "lane"),
    "nul-lane": (NewEvent("t", targets=(Target("c", "x\x00"),)), "NUL"),
    "long-lane": (NewEvent("t", targets=(Target("c", "x" * LONG),)), "Limits.max_name_length"),
    "zero-cause-index": (NewEvent("t", cause=AttemptRef("c", None, 0, 1)), "index"),
    "zero-cause-attempt": (NewEvent("t", cause=AttemptRef("c", None, 1, 0)), "attempt"),
    "negative-cause-index": (NewEvent("t", cause=AttemptRef("c", None, -1, 1)), "index"),
    "reserved-clear-type": (NewEvent("a2.cleared"), "reserved"),
    "surrogate-type": (NewEvent("t\ud800"), "Unicode"),
    "surrogate-id": (NewEvent("t", id="i\udc00"), "Unicode"),
}


@pytest.mark.parametrize("name", list(BAD_EVENTS))
async def test_bad_events_are_refused(store: Store, name: str) -> None:
    before = await prepare(store)
    bad, fragment = BAD_EVENTS[name]
    await refused(store, before, lambda: store.append("s", [ev("fine"), bad]), fragment)


@pytest.mark.parametrize("events", [[{"type": "t"}], "t", None], ids=["dict", "string", "none"])
async def test_events_must_be_a_sequence_of_new_events(store: Store, events: Any) -> None:
    before = await prepare(store)
    await refused(store, before, lambda: store.append("s", events))


async def test_a_target_naming_a_declared_log_consumer_is_refused(store: Store) -> None:
    before = await prepare(store)
    batch = [ev("t", to=["audit"])]
    await refused(store, before, lambda: store.append("s", batch, consumers=[LOG]), "audit")


async def test_a_returned_target_naming_a_declared_log_consumer_is_refused(
    store: Store,
) -> None:
    before = await prepare(store)
    await refused(
        store,
        before,
        lambda: store.complete_attempt(
            "s",
            consumer="c",
            lane=None,
            index=1,
            attempt=1,
            events=[ev("r", id="r", to=["audit"])],
            consumers=[LOG],
        ),
        "audit",
    )


async def test_returned_events_need_ids(store: Store) -> None:
    before = await prepare(store)
    await refused(
        store,
        before,
        lambda: store.complete_attempt(
            "s", consumer="c", lane=None, index=1, attempt=1, events=[ev("r", id="r"), ev("r")]
        ),
        "id",
    )


@pytest.mark.parametrize("payload", [math.nan, {1, 2}, "x\x00"], ids=["nan", "set", "nul"])
async def test_returned_payloads_must_be_json(store: Store, payload: Any) -> None:
    before = await prepare(store)
    await refused(
        store,
        before,
        lambda: store.complete_attempt(
            "s", consumer="c", lane=None, index=1, attempt=1, events=[ev("r", payload, id="r")]
        ),
    )
