"""The consumer registry: registered log consumers are woken by writes that name no consumers."""

from __future__ import annotations

import pytest

from a2pg import A2Error, Consumer, LogSpec, Target
from a2pg.store import Store

from .helpers import (
    MakeStore,
    append,
    assert_code,
    assert_settled,
    claim_one,
    completed,
    cursor_of,
    cursor_view,
    ev,
    fingerprint,
    log_consumer,
)

AUDIT = log_consumer("audit", types=["a"])


async def registered(store: Store) -> list[Consumer]:
    return sorted(await store.registered_consumers(), key=lambda c: c.name)


async def test_nothing_is_registered_at_first(store: Store) -> None:
    assert await store.registered_consumers() == []


async def test_log_consumers_are_stored_and_targeted_ones_ignored(store: Store) -> None:
    billing = log_consumer("billing", lane="money", backfill=True)
    await store.register_consumers([AUDIT, Consumer("mailer"), billing])
    assert await registered(store) == [AUDIT, billing]


async def test_re_registering_updates_the_spec(store: Store) -> None:
    await store.register_consumers([AUDIT])
    wider = log_consumer("audit", types=["a", "b"], backfill=True)
    await store.register_consumers([wider])
    assert await registered(store) == [wider]


async def test_unregister_removes_the_names(store: Store) -> None:
    other = log_consumer("other")
    await store.register_consumers([AUDIT, other])
    await store.unregister_consumers(["audit", "never-registered"])
    assert await registered(store) == [other]


async def test_registry_is_shared_by_store_instances(store: Store, make_store: MakeStore) -> None:
    await store.register_consumers([AUDIT])
    other = await make_store()
    assert await other.registered_consumers() == [AUDIT]


async def test_an_appender_naming_no_consumers_wakes_registered_ones(
    store: Store, make_store: MakeStore
) -> None:
    await store.register_consumers([AUDIT])
    appender = await make_store()
    result = await appender.append("s", [ev("b"), ev("a")])
    assert result.has_pending is True
    assert cursor_view(await store.cursors("s")) == [("audit", "log", "log", 0, 2)]
    head = await claim_one(store, "s", consumers=[AUDIT])
    assert (head.consumer, head.index) == ("audit", 2)


async def test_an_empty_consumer_list_wakes_nobody(store: Store) -> None:
    await store.register_consumers([AUDIT])
    result = await store.append("s", [ev("a")], consumers=[])
    assert result.has_pending is False
    assert await store.cursors("s") == []


async def test_explicit_consumers_replace_the_registry(store: Store) -> None:
    await store.register_consumers([AUDIT])
    await append(store, "s", ev("a"), consumers=[log_consumer("other")])
    assert [c.consumer for c in await store.cursors("s")] == ["other"]


async def test_a_completion_naming_no_consumers_wakes_registered_ones(store: Store) -> None:
    await store.register_consumers([AUDIT])
    await append(store, "s", ev("x", to=["worker"]))
    head = await claim_one(store, "s")
    await completed(store, head, ev("a", id="r"))
    cursor = await cursor_of(store, "s", "audit", "log")
    assert (cursor.position, cursor.head) == (1, 2)


async def test_re_registered_types_reach_the_cursor(store: Store) -> None:
    await store.register_consumers([AUDIT])
    await append(store, "s", ev("a"))
    await append(store, "s", ev("b"))
    await store.register_consumers([log_consumer("audit", types=["a", "b"])])
    head = await claim_one(store, "s")
    await completed(store, head)
    assert (await cursor_of(store, "s", "audit", "log")).head == 2


async def test_re_registered_types_wake_on_new_types(store: Store) -> None:
    await store.register_consumers([AUDIT])
    await store.register_consumers([log_consumer("audit", types=["b"])])
    await append(store, "s", ev("a"), ev("b"))
    assert cursor_view(await store.cursors("s")) == [("audit", "log", "log", 0, 2)]


async def test_a_registered_backfill_consumer_starts_at_the_marker(store: Store) -> None:
    await append(store, "s", ev("a"), ev("a"))
    await store.register_consumers([log_consumer("audit", types=["a"], backfill=True)])
    await append(store, "s", ev("a"))
    assert cursor_view(await store.cursors("s")) == [("audit", "log", "log", 0, 1)]


async def test_unregistering_stops_new_wakes_but_keeps_cursors(store: Store) -> None:
    await store.register_consumers([AUDIT])
    await append(store, "s", ev("a"))
    await completed(store, await claim_one(store, "s"))
    await store.unregister_consumers(["audit"])
    await append(store, "s", ev("a"))
    await append(store, "t", ev("a"))
    assert cursor_view(await store.cursors("s")) == [("audit", "log", "log", 1, None)]
    assert await store.cursors("t") == []
    await assert_settled(store, "s")


async def test_a_target_naming_a_registered_log_consumer_is_invalid(store: Store) -> None:
    await store.register_consumers([AUDIT])
    await append(store, "s", ev("x"))
    before = await fingerprint(store, "s")
    with pytest.raises(A2Error) as error:
        await store.append("s", [ev("x", to=[Target("audit")])])
    assert_code(error, "INVALID_ARGUMENT", "audit")
    assert await fingerprint(store, "s") == before


async def test_explicit_consumers_decide_what_a_target_may_name(store: Store) -> None:
    await store.register_consumers([AUDIT])
    [event] = await append(store, "s", ev("x", to=[Target("audit", "q")]), consumers=[])
    assert cursor_view(await store.cursors("s")) == [("audit", "q", "lane", 0, event.index)]


async def test_registration_accepts_the_default_log_spec(store: Store) -> None:
    plain = Consumer("plain", LogSpec())
    await store.register_consumers([plain])
    assert await store.registered_consumers() == [plain]
    await append(store, "s", ev("anything"))
    assert cursor_view(await store.cursors("s")) == [("plain", "log", "log", 0, 1)]
