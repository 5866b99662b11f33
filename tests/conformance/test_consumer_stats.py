"""consumer_stats(): each consumer's ready, claimed, backing-off and dead heads across
sessions, its blocked lanes and what they hold back, its lag, and whether it is registered."""

from __future__ import annotations

from a2pg import Consumer, ConsumerStats, Target
from a2pg.ids import FakeClock
from a2pg.store import Store

from .helpers import TTL, append, claim_one, ev, fail, log_consumer

LANE = Target("d", "x")
D = Consumer("d")


def stats(
    consumer: str,
    *,
    ready: int = 0,
    claimed: int = 0,
    backing_off: int = 0,
    dead_letters: int = 0,
    blocked_lanes: int = 0,
    blocked: int = 0,
    lag: float | None = None,
    registered: bool = False,
) -> ConsumerStats:
    return ConsumerStats(
        consumer, ready, claimed, backing_off, dead_letters, blocked_lanes, blocked, lag, registered
    )


async def busy_session(store: Store, session_id: str = "s") -> None:
    """c: head 1 claimed, head 2 backing off for 60 s, head 3 dead, head 4 ready; d's lane x:
    head 5 dead, holding back 6 and 7. All at the clock's time."""
    await append(store, session_id, *(ev(to=["c"]) for _ in range(4)), *(ev(to=[LANE]),) * 3)
    await claim_one(store, session_id, through=1)
    await fail(store, await claim_one(store, session_id, through=2), retry_after=60)
    await fail(store, await claim_one(store, session_id, through=3), max_failures=1)
    await fail(store, await claim_one(store, session_id, consumers=[D]), max_failures=1)


async def test_an_empty_store_has_no_consumers(store: Store) -> None:
    assert await store.consumer_stats() == []


async def test_a_registered_consumer_is_listed_with_nothing_to_do(store: Store) -> None:
    await store.register_consumers([log_consumer("audit")])
    assert await store.consumer_stats() == [stats("audit", registered=True)]


async def test_each_head_is_counted_once_where_it_stands(store: Store, clock: FakeClock) -> None:
    await busy_session(store)
    clock.advance(10)
    assert await store.consumer_stats() == [
        stats("c", ready=1, claimed=1, backing_off=1, dead_letters=1, lag=10.0),
        stats("d", dead_letters=1, blocked_lanes=1, blocked=2),
    ]


async def test_lapsed_leases_and_due_retries_are_ready_again(
    store: Store, clock: FakeClock
) -> None:
    await busy_session(store)
    clock.advance(TTL + 1)  # head 1's lease lapsed: ready since it ended
    [c, _] = await store.consumer_stats()
    assert (c.ready, c.claimed, c.backing_off, c.oldest_ready_age) == (2, 0, 1, TTL + 1)
    clock.advance(60)  # head 2's retry is due
    [c, _] = await store.consumer_stats()
    assert (c.ready, c.claimed, c.backing_off, c.oldest_ready_age) == (3, 0, 0, TTL + 61)


async def test_sessions_add_up_and_the_lag_is_the_longest_wait(
    store: Store, clock: FakeClock
) -> None:
    await busy_session(store, "s1")
    clock.advance(3)
    await busy_session(store, "s2")
    clock.advance(4)
    assert await store.consumer_stats() == [
        stats("c", ready=2, claimed=2, backing_off=2, dead_letters=2, lag=7.0),
        stats("d", dead_letters=2, blocked_lanes=2, blocked=4),
    ]


async def test_no_lag_while_nothing_is_ready(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=["c"]), ev(to=["c"]))
    await claim_one(store, "s", through=1)
    await fail(store, await claim_one(store, "s", through=2), retry_after=60)
    clock.advance(5)
    assert await store.consumer_stats() == [stats("c", claimed=1, backing_off=1)]


async def test_heads_at_or_below_the_clear_index_are_not_counted(
    store: Store, clock: FakeClock
) -> None:
    await busy_session(store)
    await store.clear("s")
    assert await store.consumer_stats() == []
    await append(store, "s", ev(to=["c"]))
    clock.advance(2)
    assert await store.consumer_stats() == [stats("c", ready=1, lag=2.0)]


async def test_a_dead_log_head_blocks_the_later_events_it_takes(store: Store) -> None:
    audit = log_consumer("audit", types=["order"])
    await store.register_consumers([audit])
    await append(store, "s", ev("order"))
    await fail(store, await claim_one(store, "s"), max_failures=1)
    await append(store, "s", ev("order"), ev("note"), ev("order"))
    assert await store.consumer_stats() == [
        stats("audit", dead_letters=1, blocked_lanes=1, blocked=2, registered=True)
    ]


async def test_redriven_and_finished_work_leaves_the_counts(store: Store) -> None:
    await busy_session(store)
    await store.redrive("s", consumer="d", index=5, action="skip")
    await store.redrive("s", consumer="c", index=3, action="retry")
    assert await store.consumer_stats() == [
        stats("c", ready=2, claimed=1, backing_off=1, lag=0.0),
        stats("d", ready=1, lag=0.0),
    ]
