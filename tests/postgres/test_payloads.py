"""Payloads PostgreSQL is picky about: NUL is refused cleanly, the rest round-trips in meaning."""

from __future__ import annotations

import pytest

from a2pg import A2Error, NewEvent
from a2pg.postgres import PostgresStore

pytestmark = pytest.mark.postgres


def _nested(depth: int) -> object:
    value: object = {"leaf": True}
    for level in range(depth):
        value = {"level": level, "child": [value]}
    return value


ROUND_TRIPS = [
    pytest.param(None, id="none"),
    pytest.param(2**53 + 1, id="int-beyond-2**53"),
    pytest.param(-(2**63) - 12345, id="int-beyond-int64"),
    pytest.param(10**40, id="huge-int"),
    pytest.param(0.1, id="float"),
    pytest.param(1e300, id="big-float"),
    pytest.param("héllo wörld ✓ 𝄞 日本語", id="unicode"),
    pytest.param("\\u0000 is six characters here", id="escaped-nul-text"),
    pytest.param({"emoji": "🙂", "rtl": "مرحبا", "": "empty key"}, id="unicode-keys"),
    pytest.param(_nested(100), id="deep-nesting"),
    pytest.param([True, False, None, 0, -1, "x", [], {}], id="mixed-list"),
]


@pytest.mark.parametrize("payload", ROUND_TRIPS)
async def test_payload_round_trips(postgres_dsn: str, payload: object) -> None:
    store = await PostgresStore.open(postgres_dsn)
    try:
        appended = await store.append("s", [NewEvent("t", payload)])
        [stored] = await store.read("s")
    finally:
        await store.close()
    assert stored.payload == payload
    assert appended.events[0].payload == payload
    assert type(stored.payload) is type(payload)


NUL_INPUTS = [
    pytest.param(NewEvent("t", "a\x00b"), id="payload-str"),
    pytest.param(NewEvent("t", {"k\x00": 1}), id="payload-key"),
    pytest.param(NewEvent("t", ["ok", {"deep": ["\x00"]}]), id="payload-nested"),
    pytest.param(NewEvent("t", None, id="id\x00"), id="event-id"),
    pytest.param(NewEvent("t\x00"), id="event-type"),
]


@pytest.mark.parametrize("event", NUL_INPUTS)
async def test_nul_is_invalid_argument_not_a_driver_error(
    postgres_dsn: str, event: NewEvent
) -> None:
    store = await PostgresStore.open(postgres_dsn)
    try:
        with pytest.raises(A2Error) as caught:
            await store.append("s", [NewEvent("ok"), event])
        assert caught.value.code == "INVALID_ARGUMENT"
        assert await store.read("s") == []
        with pytest.raises(A2Error) as caught:
            await store.append("s\x00", [NewEvent("ok")])
        assert caught.value.code == "INVALID_ARGUMENT"
    finally:
        await store.close()
