"""clear and reclaim: the marker, if_last_index, what it hides, id reuse, batched reclaim."""

from __future__ import annotations

import pytest

from a2pg import CLEAR_EVENT_TYPE, ClearResult, ReclaimResult, Superseded, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    append,
    assert_settled,
    claim_one,
    complete,
    cursor_view,
    ev,
    fail,
    fingerprint,
    log_consumer,
)

RECLAIM_BATCH = 256


async def test_clear_appends_the_marker(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(), ev())
    clock.advance(1)
    assert await store.clear("s") == ClearResult(cleared=True, index=3, clear_index=3)
    [marker] = await store.read("s")
    assert (marker.index, marker.type, marker.payload, marker.cause) == (
        3,
        CLEAR_EVENT_TYPE,
        None,
        None,
    )
    assert marker.created_at == clock()


async def test_clearing_an_empty_session(store: Store) -> None:
    assert await store.clear("s") == ClearResult(True, 1, 1)
    assert [e.type for e in await store.read("s")] == [CLEAR_EVENT_TYPE]


async def test_a_second_clear_moves_the_marker(store: Store) -> None:
    await append(store, "s", ev())
    await store.clear("s")
    await append(store, "s", ev())
    assert await store.clear("s") == ClearResult(True, 4, 4)
    assert [e.index for e in await store.read("s")] == [4]


async def test_if_last_index_at_the_head_clears(store: Store) -> None:
    await append(store, "s", ev(), ev())
    assert await store.clear("s", if_last_index=2) == ClearResult(True, 3, 3)


@pytest.mark.parametrize("last", [1, 3, 0])
async def test_if_last_index_elsewhere_does_not_clear(store: Store, last: int) -> None:
    await append(store, "s", ev(), ev())
    before = await fingerprint(store, "s")
    assert await store.clear("s", if_last_index=last) == ClearResult(False, 2, 0)
    assert await fingerprint(store, "s") == before


async def test_if_last_index_on_a_cleared_session_reports_the_current_marker(
    store: Store,
) -> None:
    await append(store, "s", ev())
    await store.clear("s")
    await append(store, "s", ev(), ev())
    assert await store.clear("s", if_last_index=3) == ClearResult(False, 4, 2)


async def test_repeating_a_clear_that_happened_reports_it_without_a_second_marker(
    store: Store,
) -> None:
    await append(store, "s", ev(), ev())
    first = await store.clear("s", if_last_index=2)
    assert await store.clear("s", if_last_index=2) == first
    await append(store, "s", ev())
    assert await store.clear("s", if_last_index=2) == ClearResult(True, 4, 3)
    assert [e.type for e in await store.read("s")] == [CLEAR_EVENT_TYPE, "note"]


async def test_clear_drops_targeted_work_and_restarts_log_cursors(store: Store) -> None:
    audit = log_consumer("audit", backfill=True)
    await append(
        store, "s", ev(to=["c", Target("d", "x")]), ev(to=[Target("d", "x")]), consumers=[audit]
    )
    await claim_one(store, "s", consumers=[audit])
    await store.clear("s")
    assert cursor_view(await store.cursors("s")) == [("audit", "log", "log", 3, None)]
    [cursor] = await store.cursors("s")
    assert cursor.dispatch.attempt_count == 0
    await assert_settled(store, "s")
    assert (await store.append("s", [])).has_pending is False


async def test_work_below_the_marker_is_superseded(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    head = await claim_one(store, "s")
    await store.clear("s")
    assert await complete(store, head) == Superseded()
    assert (await fail(store, head)).outcome == "superseded"
    assert [e.index for e in await store.read("s")] == [2]


async def test_new_work_after_a_clear_names_the_clear_index(store: Store) -> None:
    await append(store, "s", ev())
    await store.clear("s")
    await append(store, "s", ev(to=[Target("c", "x")]))
    head = await claim_one(store, "s")
    assert (head.index, head.clear_index) == (3, 2)
    assert cursor_view(await store.cursors("s")) == [("c", "x", "lane", 2, 3)]


async def test_ids_below_the_marker_may_be_appended_again(store: Store) -> None:
    await append(store, "s", ev("old", 1, id="k"))
    await store.clear("s")
    [again] = await append(store, "s", ev("new", 2, id="k"))
    assert (again.index, again.type, again.payload) == (3, "new", 2)
    replay = await store.append("s", [ev("new", 2, id="k")])
    assert replay.events == [again]


async def test_reclaim_removes_what_is_below_the_marker(store: Store) -> None:
    await append(store, "s", ev(), ev(), ev())
    await store.clear("s")
    await append(store, "s", ev())
    visible = await store.read("s")
    assert await store.reclaim("s") == ReclaimResult(deleted=3, done=True)
    assert await store.reclaim("s") == ReclaimResult(deleted=0, done=True)
    assert await store.read("s") == visible


async def test_reclaim_of_a_never_cleared_session_is_done(store: Store) -> None:
    await append(store, "s", ev())
    assert await store.reclaim("s") == ReclaimResult(0, True)
    assert await store.reclaim("nobody") == ReclaimResult(0, True)
    assert [e.index for e in await store.read("s")] == [1]


async def test_reclaim_works_in_bounded_batches(store: Store) -> None:
    extra = 44
    await store.append("s", [ev() for _ in range(RECLAIM_BATCH + extra)])
    await store.clear("s")
    assert await store.reclaim("s") == ReclaimResult(RECLAIM_BATCH, False)
    assert await store.reclaim("s") == ReclaimResult(extra, True)
    assert [e.index for e in await store.read("s")] == [RECLAIM_BATCH + extra + 1]


async def test_ids_stay_reusable_after_reclaim(store: Store) -> None:
    await append(store, "s", ev(id="k"))
    await store.clear("s")
    await store.reclaim("s")
    [event] = await append(store, "s", ev(id="k"))
    assert event.index == 3


async def test_a_session_keeps_counting_after_reclaim(store: Store) -> None:
    await append(store, "s", ev(), ev())
    await store.clear("s")
    await store.reclaim("s")
    [event] = await append(store, "s", ev())
    assert event.index == 4
    assert (await store.clear("s")).clear_index == 5
