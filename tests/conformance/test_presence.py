"""Presence: last writer wins per field by `at`, tombstones, expiry and sweeping."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from a2pg import PresenceRow
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import at

NS = "room"


async def write(
    store: Store,
    participant: str,
    values: dict[str, Any],
    when: datetime,
    *,
    seen: Any = "seen",
    ttl: float = 60,
    ns: str = NS,
) -> dict[str, Any]:
    return await store.presence.write(ns, participant, values, at=when, seen=seen, ttl=ttl)


def view(rows: list[PresenceRow]) -> list[tuple[str, str, Any]]:
    return [(r.participant, r.field, r.value) for r in rows]


async def test_a_write_is_read_back_whole(store: Store, clock: FakeClock) -> None:
    when = at(clock(), -3)
    applied = await write(store, "ann", {"typing": True}, when, seen={"tab": 2}, ttl=30)
    assert applied == {"typing": True}
    assert await store.presence.read(NS) == [
        PresenceRow("ann", "typing", True, {"tab": 2}, when, at(clock(), 30))
    ]


async def test_rows_come_by_participant_then_field(store: Store, clock: FakeClock) -> None:
    await write(store, "bob", {"z": 1, "a": 2}, clock())
    await write(store, "ann", {"m": 3}, clock())
    assert view(await store.presence.read(NS)) == [
        ("ann", "m", 3),
        ("bob", "a", 2),
        ("bob", "z", 1),
    ]


async def test_an_older_write_loses(store: Store, clock: FakeClock) -> None:
    await write(store, "ann", {"cursor": 10}, at(clock(), 10))
    assert await write(store, "ann", {"cursor": 5}, at(clock(), 5)) == {}
    assert view(await store.presence.read(NS)) == [("ann", "cursor", 10)]


async def test_a_newer_write_wins(store: Store, clock: FakeClock) -> None:
    await write(store, "ann", {"cursor": 10}, at(clock(), 10), seen="old")
    assert await write(store, "ann", {"cursor": 20}, at(clock(), 20), seen="new") == {"cursor": 20}
    [row] = await store.presence.read(NS)
    assert (row.value, row.seen, row.at) == (20, "new", at(clock(), 20))


async def test_an_equal_at_goes_to_the_later_writer(store: Store, clock: FakeClock) -> None:
    await write(store, "ann", {"cursor": 1}, clock())
    assert await write(store, "ann", {"cursor": 2}, clock()) == {"cursor": 2}
    assert view(await store.presence.read(NS)) == [("ann", "cursor", 2)]


async def test_fields_are_judged_one_by_one(store: Store, clock: FakeClock) -> None:
    await write(store, "ann", {"a": 1, "b": 1}, at(clock(), 10))
    await write(store, "ann", {"b": 2}, at(clock(), 30))
    applied = await write(store, "ann", {"a": 3, "b": 3}, at(clock(), 20))
    assert applied == {"a": 3}
    assert view(await store.presence.read(NS)) == [("ann", "a", 3), ("ann", "b", 2)]


async def test_an_expired_value_loses_even_to_an_older_write(
    store: Store, clock: FakeClock
) -> None:
    await write(store, "ann", {"cursor": 10}, at(clock(), 10), ttl=5)
    clock.advance(5)
    assert await write(store, "ann", {"cursor": 1}, at(clock(), -100)) == {"cursor": 1}
    assert view(await store.presence.read(NS)) == [("ann", "cursor", 1)]


async def test_a_tombstone_hides_the_field_and_keeps_its_time(
    store: Store, clock: FakeClock
) -> None:
    await write(store, "ann", {"typing": True}, at(clock(), 1))
    assert await write(store, "ann", {"typing": None}, at(clock(), 2)) == {"typing": None}
    assert await store.presence.read(NS) == []
    assert await write(store, "ann", {"typing": True}, at(clock(), 1.5)) == {}
    assert await store.presence.read(NS) == []
    assert await write(store, "ann", {"typing": "yes"}, at(clock(), 3)) == {"typing": "yes"}
    assert view(await store.presence.read(NS)) == [("ann", "typing", "yes")]


async def test_a_tombstone_beside_live_fields(store: Store, clock: FakeClock) -> None:
    await write(store, "ann", {"a": 1, "b": None}, clock())
    assert view(await store.presence.read(NS)) == [("ann", "a", 1)]


async def test_values_expire_at_their_ttl(store: Store, clock: FakeClock) -> None:
    await write(store, "ann", {"short": 1}, clock(), ttl=10)
    await write(store, "ann", {"long": 2}, clock(), ttl=20)
    clock.advance(9.5)
    assert view(await store.presence.read(NS)) == [("ann", "long", 2), ("ann", "short", 1)]
    clock.advance(0.5)
    assert view(await store.presence.read(NS)) == [("ann", "long", 2)]
    clock.advance(10)
    assert await store.presence.read(NS) == []


async def test_expiry_counts_from_the_store_clock_not_from_at(
    store: Store, clock: FakeClock
) -> None:
    await write(store, "ann", {"a": 1}, at(clock(), -1000), ttl=10)
    [row] = await store.presence.read(NS)
    assert row.expires_at == at(clock(), 10)


async def test_namespaces_are_separate(store: Store, clock: FakeClock) -> None:
    await write(store, "ann", {"a": 1}, clock(), ns="one")
    await write(store, "ann", {"a": 2}, at(clock(), -5), ns="two")
    assert view(await store.presence.read("one")) == [("ann", "a", 1)]
    assert view(await store.presence.read("two")) == [("ann", "a", 2)]
    assert await store.presence.read("three") == []


async def test_participants_are_separate(store: Store, clock: FakeClock) -> None:
    await write(store, "ann", {"a": 1}, at(clock(), 10))
    assert await write(store, "bob", {"a": 2}, clock()) == {"a": 2}


async def test_an_empty_write_applies_nothing(store: Store, clock: FakeClock) -> None:
    assert await write(store, "ann", {}, clock()) == {}
    assert await store.presence.read(NS) == []


async def test_values_and_seen_are_any_json(store: Store, clock: FakeClock) -> None:
    value = {"pos": [1, 2.5], "sel": None, "label": "é"}
    await write(store, "ann", {"cursor": value}, clock(), seen=[1, {"x": None}])
    [row] = await store.presence.read(NS)
    assert (row.value, row.seen) == (value, [1, {"x": None}])
