"""Lanes: one event at a time in strict index order, with event cursors running beside them."""

from __future__ import annotations

from a2pg import Completed, Superseded, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import (
    append,
    assert_busy,
    assert_settled,
    at,
    claim,
    claim_one,
    complete,
    completed,
    cursor_of,
    cursor_view,
    ev,
    fail,
    log_consumer,
    refs,
)

X = Target("c", "x")


async def test_a_lane_hands_out_one_event_at_a_time_in_order(store: Store) -> None:
    await append(store, "s", ev(to=[X]), ev(to=[X]), ev(to=[X]))
    for index in (1, 2, 3):
        head = await claim_one(store, "s")
        assert (head.index, head.lane, head.attempt) == (index, "x", 1)
        assert head.dispatch.claim_expires_at is not None
        await assert_busy(store, "s", head.dispatch.claim_expires_at)
        await completed(store, head)
    await assert_settled(store, "s")


async def test_an_idle_lane_stays_listed_at_its_position(store: Store) -> None:
    await append(store, "s", ev(to=[X]), ev(to=[X]))
    for _ in range(2):
        await completed(store, await claim_one(store, "s"))
    assert cursor_view(await store.cursors("s")) == [("c", "x", "lane", 2, None)]


async def test_a_new_lane_starts_at_the_clear_index(store: Store) -> None:
    await append(store, "s", ev(), ev(to=[X]))
    assert cursor_view(await store.cursors("s")) == [("c", "x", "lane", 0, 2)]


async def test_lanes_of_one_consumer_run_concurrently(store: Store) -> None:
    await append(store, "s", ev(to=[X]), ev(to=[Target("c", "y")]), ev(to=[X]))
    heads = await claim(store, "s")
    assert refs(heads) == [("s", "c", "x", 1), ("s", "c", "y", 2)]


async def test_the_same_lane_name_is_separate_per_consumer(store: Store) -> None:
    await append(store, "s", ev(to=[X]), ev(to=[Target("d", "x")]))
    heads = await claim(store, "s")
    assert refs(heads) == [("s", "c", "x", 1), ("s", "d", "x", 2)]


async def test_event_cursors_run_beside_a_lane(store: Store) -> None:
    await append(store, "s", ev(to=[X, "d"]), ev(to=[X, "d"]), ev(to=[X, "d"]))
    heads = await claim(store, "s")
    assert refs(heads) == [
        ("s", "c", "x", 1),
        ("s", "d", None, 1),
        ("s", "d", None, 2),
        ("s", "d", None, 3),
    ]


async def test_a_lane_skips_events_not_queued_on_it(store: Store) -> None:
    await append(store, "s", ev(to=[X]), ev(to=["d"]), ev(), ev(to=[X]))
    head = await claim_one(store, "s", consumers=None, through=1)
    await completed(store, head)
    cursor = await cursor_of(store, "s", "c", "x")
    assert (cursor.position, cursor.head) == (1, 4)


async def test_one_batch_queues_several_events_on_a_lane(store: Store) -> None:
    await append(store, "s", ev("a", to=[X]), ev("b", to=[X]))
    head = await claim_one(store, "s")
    assert head.event.type == "a"
    await completed(store, head)
    assert (await claim_one(store, "s")).event.type == "b"


async def test_a_failing_lane_head_holds_back_later_events(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=[X]), ev(to=[X]))
    head = await claim_one(store, "s")
    await fail(store, head, retry_after=10)
    await assert_busy(store, "s", at(clock(), 10))
    clock.advance(10)
    again = await claim_one(store, "s")
    assert (again.index, again.attempt, again.failure_count) == (1, 2, 1)


async def test_a_dead_lettered_lane_head_blocks_its_lane(store: Store) -> None:
    await append(store, "s", ev(to=[X]), ev(to=[X, "d"]))
    head = await claim_one(store, "s", through=1)
    await fail(store, head, max_failures=1)
    cursor = await cursor_of(store, "s", "c", "x")
    assert cursor.blocked and cursor.dead_lettered and cursor.head == 1
    assert refs(await claim(store, "s")) == [("s", "d", None, 2)]
    assert (await cursor_of(store, "s", "c", "x")).head == 1


async def test_a_dead_lettered_event_cursor_is_not_blocked(store: Store) -> None:
    await append(store, "s", ev(to=["c"]))
    await fail(store, await claim_one(store, "s"), max_failures=1)
    [cursor] = await store.cursors("s")
    assert cursor.dead_lettered and not cursor.blocked


async def test_a_lane_head_starts_with_fresh_dispatch(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=[X]), ev(to=[X]))
    first = await claim_one(store, "s")
    await fail(store, first)
    await completed(store, await claim_one(store, "s"))
    cursor = await cursor_of(store, "s", "c", "x")
    assert (cursor.head, cursor.dispatch.attempt_count, cursor.dispatch.failure_count) == (2, 0, 0)
    assert cursor.dispatch.last_error is None


async def test_an_idle_lane_takes_the_next_appended_event(store: Store) -> None:
    await append(store, "s", ev(to=[X]))
    await completed(store, await claim_one(store, "s"))
    await append(store, "s", ev(), ev(to=[X]))
    head = await claim_one(store, "s")
    assert (head.index, head.attempt) == (3, 1)
    cursor = await cursor_of(store, "s", "c", "x")
    assert (cursor.position, cursor.head) == (1, 3)


async def test_a_lane_completion_retries_after_the_lane_moved_on(store: Store) -> None:
    await append(store, "s", ev(to=[X]), ev(to=[X]), ev(to=[X]))
    first = await claim_one(store, "s")
    [r1] = await completed(store, first, ev("r", id="r1"))
    await completed(store, await claim_one(store, "s"), ev("r", id="r2"))
    assert await complete(store, first, ev("r", id="r1")) == Completed([r1])
    assert await complete(store, first, ev("r", id="r1"), attempt=2) == Superseded()
    assert (await cursor_of(store, "s", "c", "x")).head == 3


async def test_listing_orders_consumers_then_named_lanes_then_event_cursors(
    store: Store,
) -> None:
    await append(
        store,
        "s",
        ev(to=[Target("a", "z")]),
        ev(to=["a"]),
        ev(to=[Target("a", "m")]),
        ev(to=[Target("b", "k")]),
        ev(to=["a"]),
        consumers=[log_consumer("c", backfill=True)],
    )
    assert cursor_view(await store.cursors("s")) == [
        ("a", "m", "lane", 0, 3),
        ("a", "z", "lane", 0, 1),
        ("a", None, "event", 1, 2),
        ("a", None, "event", 4, 5),
        ("b", "k", "lane", 0, 4),
        ("c", "log", "log", 0, 1),
    ]
