"""Names at their byte limit, in 4-byte characters, fit every column and index; one more is refused.

Run with the default limits and with the widest limits ``Limits`` accepts (the widest
index key exactly at ``INDEX_KEY_BUDGET``): on PostgreSQL this writes a maximal key
into every index, with random characters so no index tuple compresses.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from a2pg import (
    A2Error,
    AttemptRef,
    ClaimRef,
    Completed,
    Consumer,
    Limits,
    LogSpec,
    NewEvent,
    SnapshotWrite,
    Target,
)
from a2pg.contract import DEFAULT_LIMITS
from a2pg.contract.limits import INDEX_KEY_BUDGET
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import assert_code, claim, fingerprint

WIDEST = Limits(
    max_session_id_length=1_000,
    max_session_id_bytes=INDEX_KEY_BUDGET - 3 * 600 - 1,
    max_name_length=1_000,
    max_name_bytes=600,
    max_id_length=1_000,
    max_id_bytes=1_200,
    max_type_length=1_000,
    max_type_bytes=1_200,
)


@pytest.fixture(params=[DEFAULT_LIMITS, WIDEST], ids=["default", "widest"])
def limits(request: pytest.FixtureRequest) -> Limits:
    chosen: Limits = request.param
    return chosen


class Wide:
    """Texts of random 4-byte characters (incompressible), distinct per call."""

    def __init__(self) -> None:
        self._random = random.Random(2026)

    def text(self, size: int) -> str:
        """``size`` UTF-8 bytes: 4-byte characters, then 1-byte ones to make up the rest."""
        wide = "".join(chr(self._random.randrange(0x10000, 0x110000)) for _ in range(size // 4))
        return wide + "abc"[: size % 4]


def test_the_widest_key_fits_the_budget(limits: Limits) -> None:
    assert limits.widest_key_bytes <= INDEX_KEY_BUDGET


async def test_names_at_their_byte_limits_are_stored_and_read_back(
    store: Store, limits: Limits, clock: FakeClock
) -> None:
    w = Wide()
    sid = w.text(limits.max_session_id_bytes)
    name = limits.max_name_bytes
    consumer, lane, reducer, holder = w.text(name), w.text(name), w.text(name), w.text(name)
    log_name, log_lane = w.text(name), w.text(name)
    event_type, event_id = w.text(limits.max_type_bytes), w.text(limits.max_id_bytes)

    log = Consumer(log_name, LogSpec(log_lane, (event_type,)))
    await store.register_consumers([log])
    assert await store.registered_consumers() == [log]
    first = NewEvent(event_type, {"n": 1}, id=event_id, targets=(Target(consumer, lane),))
    [stored] = (await store.append(sid, [first])).events
    assert (stored.session_id, stored.id, stored.type) == (sid, event_id, event_type)
    assert [e.id for e in await store.read(sid, types=[event_type])] == [event_id]

    heads = await claim(store, sid, holder=holder)
    assert sorted((h.consumer, h.lane) for h in heads) == sorted(
        [(consumer, lane), (log_name, log_lane)]
    )
    lane_head = next(h for h in heads if h.consumer == consumer)
    log_head = next(h for h in heads if h.consumer == log_name)
    assert lane_head.dispatch.claim_holder == holder

    # The widest key: snapshot pins hold the session id, a consumer, its lane and a reducer.
    pin = ClaimRef(consumer, lane, lane_head.index)
    await store.put_snapshots(sid, reducer, [SnapshotWrite(1, {"s": 1}, pins=[pin])])
    assert (await store.read_state(sid, reducer)).state == {"s": 1}

    returned = NewEvent(w.text(limits.max_type_bytes), None, id=w.text(limits.max_id_bytes))
    result = await store.complete_attempt(
        sid,
        consumer=consumer,
        lane=lane,
        index=lane_head.index,
        attempt=lane_head.attempt,
        events=[returned],
    )
    assert isinstance(result, Completed)
    assert result.events[0].cause == AttemptRef(consumer, lane, 1, lane_head.attempt)
    failed = await store.fail_attempt(
        sid,
        consumer=log_name,
        lane=log_lane,
        index=log_head.index,
        attempt=log_head.attempt,
        error="e",
        max_failures=1,
    )
    assert failed.outcome == "dead_lettered"
    assert [h.consumer for h in await store.dead_letters(sid)] == [log_name]

    ns, participant, field = w.text(name), w.text(name), w.text(name)
    await store.presence.write(ns, participant, {field: 1}, at=clock(), seen=None, ttl=60)
    [row] = await store.presence.read(ns)
    assert (row.participant, row.field, row.value) == (participant, field, 1)
    assert [s.session_id for s in await store.sessions()] == [sid]


Op = Callable[[Store, str], Awaitable[Any]]
AT = datetime(2026, 1, 1, tzinfo=UTC)

NAME_OPS: dict[str, tuple[str, Op]] = {
    "session id": (
        "max_session_id_bytes",
        lambda s, t: s.append(t, [NewEvent("t")]),
    ),
    "event id": ("max_id_bytes", lambda s, t: s.append("s", [NewEvent("t", id=t)])),
    "event type": ("max_type_bytes", lambda s, t: s.append("s", [NewEvent(t)])),
    "target consumer": (
        "max_name_bytes",
        lambda s, t: s.append("s", [NewEvent("t", targets=(Target(t),))]),
    ),
    "lane": (
        "max_name_bytes",
        lambda s, t: s.append("s", [NewEvent("t", targets=(Target("c", t),))]),
    ),
    "holder": ("max_name_bytes", lambda s, t: s.claim_available("s", holder=t, ttl=30)),
    "reducer": ("max_name_bytes", lambda s, t: s.put_snapshots("s", t, [SnapshotWrite(1, 1)])),
    "log type": (
        "max_type_bytes",
        lambda s, t: s.register_consumers([Consumer("a", LogSpec(types=(t,)))]),
    ),
    "presence field": (
        "max_name_bytes",
        lambda s, t: s.presence.write("room", "ann", {t: 1}, at=AT, seen=None, ttl=1),
    ),
}


@pytest.mark.parametrize("what", list(NAME_OPS))
async def test_one_byte_past_a_names_limit_is_refused(
    store: Store, limits: Limits, what: str
) -> None:
    setting, op = NAME_OPS[what]
    limit = getattr(limits, setting)
    text = Wide().text(limit + 1)
    shortest = min(
        limits.max_session_id_length,
        limits.max_id_length,
        limits.max_type_length,
        limits.max_name_length,
    )
    assert len(text) <= shortest  # within every character limit: the bytes decide
    await store.append("s", [NewEvent("t")])
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await op(store, text)
    assert_code(error, "INVALID_ARGUMENT", f"Limits.{setting}={limit}")
    assert await fingerprint(store, "s") == before
    assert await store.presence.read("room") == []
