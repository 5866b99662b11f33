"""consumer_stats(): each consumer's ready, claimed, backing-off, scheduled and dead heads
across sessions, its blocked lanes, what they hold back and since when, its lag, whether it
is registered or paused, its backfill, and the live workers serving it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from a2pg import BackfillProgress, Consumer, ConsumerStats, Target, WorkerBeat
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
    scheduled: int = 0,
    paused: bool = False,
    backfill: BackfillProgress | None = None,
    blocked_age: float | None = None,
    served_by: int = 0,
) -> ConsumerStats:
    return ConsumerStats(
        consumer,
        ready,
        claimed,
        backing_off,
        dead_letters,
        blocked_lanes,
        blocked,
        lag,
        registered,
        scheduled=scheduled,
        paused=paused,
        backfill=backfill,
        oldest_blocked_age=blocked_age,
        served_by=served_by,
    )


def beat(holder: str, *consumers: str, interval: float = 5.0) -> WorkerBeat:
    return WorkerBeat(
        holder=holder,
        host="box",
        pid=42,
        consumers=consumers,
        concurrency=4,
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        in_flight=0,
        version="0.1.0",
        interval=interval,
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
        stats("d", dead_letters=1, blocked_lanes=1, blocked=2, blocked_age=10.0),
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
        stats("d", dead_letters=2, blocked_lanes=2, blocked=4, blocked_age=7.0),
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
        stats("audit", dead_letters=1, blocked_lanes=1, blocked=2, registered=True, blocked_age=0.0)
    ]


async def test_redriven_and_finished_work_leaves_the_counts(store: Store) -> None:
    await busy_session(store)
    await store.redrive("s", consumer="d", index=5, action="skip")
    await store.redrive("s", consumer="c", index=3, action="retry")
    assert await store.consumer_stats() == [
        stats("c", ready=2, claimed=1, backing_off=1, lag=0.0),
        stats("d", ready=1, lag=0.0),
    ]


# -- blocked work has a lag too ------------------------------------------------------------


async def test_blocked_work_ages_from_its_oldest_dead_lane_head(
    store: Store, clock: FakeClock
) -> None:
    """The ready lag never sees work behind a dead head: its own age, from the time the
    longest-blocked lane's head was dead-lettered, does."""
    await append(store, "s1", ev(to=[LANE]), ev(to=[LANE]), ev(to=["d"]))
    await fail(store, await claim_one(store, "s1", through=1), max_failures=1)
    clock.advance(600)
    await append(store, "s2", ev(to=[LANE]))
    await fail(store, await claim_one(store, "s2"), max_failures=1)
    clock.advance(120)
    [d] = await store.consumer_stats()
    assert d == stats(
        "d", ready=1, dead_letters=2, blocked_lanes=2, blocked=1, lag=720.0, blocked_age=720.0
    )
    await store.redrive("s1", consumer="d", index=1, action="skip")
    [d] = await store.consumer_stats()
    assert (d.blocked_lanes, d.blocked, d.oldest_blocked_age) == (1, 0, 120.0)


async def test_a_dead_event_head_blocks_nothing_so_has_no_blocked_age(
    store: Store, clock: FakeClock
) -> None:
    await append(store, "s", ev(to=["c"]))
    await fail(store, await claim_one(store, "s"), max_failures=1)
    clock.advance(30)
    assert await store.consumer_stats() == [stats("c", dead_letters=1)]


# -- held back by not_before: scheduled, not backing off ---------------------------------


async def test_a_delayed_head_is_scheduled_until_its_time(store: Store, clock: FakeClock) -> None:
    later = Target("c", not_before=timedelta(seconds=60))
    await append(store, "s", ev(to=[later]), ev(to=["c"]))
    await fail(store, await claim_one(store, "s", through=2), retry_after=60)
    assert await store.consumer_stats() == [stats("c", scheduled=1, backing_off=1)]
    clock.advance(60)
    assert await store.consumer_stats() == [stats("c", ready=2, lag=0.0)]


async def test_a_delayed_head_that_failed_backs_off(store: Store, clock: FakeClock) -> None:
    await append(store, "s", ev(to=[Target("c", not_before=timedelta(seconds=5))]))
    clock.advance(5)
    await fail(store, await claim_one(store, "s"), retry_after=60)
    assert await store.consumer_stats() == [stats("c", backing_off=1)]


# -- listed with zeros: paused, served by a live worker ----------------------------------


async def test_a_paused_consumer_is_listed_and_keeps_its_counts(
    store: Store, clock: FakeClock
) -> None:
    await store.pause_consumers(["idle", "c"])
    await append(store, "s", ev(to=["c"]))
    clock.advance(3)
    assert await store.consumer_stats() == [
        stats("c", ready=1, lag=3.0, paused=True),
        stats("idle", paused=True),
    ]
    await store.resume_consumers(["idle", "c"])
    assert await store.consumer_stats() == [stats("c", ready=1, lag=3.0)]


async def test_a_live_worker_lists_the_consumers_it_serves_with_zeros(
    store: Store, clock: FakeClock
) -> None:
    """So an alert on ``dead_letters > 0`` reads 0, not "no data", for a consumer that
    never had a head."""
    await store.heartbeat(beat("w-1", "mailer", "c"))
    await store.heartbeat(beat("w-2", "c", interval=60.0))
    await append(store, "s", ev(to=["c"]))
    assert await store.consumer_stats() == [
        stats("c", ready=1, lag=0.0, served_by=2),
        stats("mailer", served_by=1),
    ]
    clock.advance(15)  # w-1 missed three beats of 5 s, not yet a fourth
    assert [s.served_by for s in await store.consumer_stats()] == [2, 1]
    clock.advance(0.5)  # w-1 is stale: it serves nothing any more
    assert await store.consumer_stats() == [stats("c", ready=1, lag=15.5, served_by=1)]
    await store.forget_workers(["w-2"])
    assert await store.consumer_stats() == [stats("c", ready=1, lag=15.5)]


async def test_a_registered_consumer_counts_its_live_workers(store: Store) -> None:
    await store.register_consumers([log_consumer("audit")])
    await store.heartbeat(beat("w-1", "audit"))
    await store.heartbeat(beat("w-2"))  # serves no consumer
    assert await store.consumer_stats() == [stats("audit", registered=True, served_by=1)]


# -- a registered log consumer's backfill ------------------------------------------------


async def test_a_backfill_shows_its_progress_until_done(store: Store, clock: FakeClock) -> None:
    await append(store, "a", ev("order"))
    await append(store, "b", ev("order"))
    started = clock.advance(1)
    await store.register_consumers([log_consumer("audit", backfill=True)])
    [audit] = await store.consumer_stats()
    assert audit == stats(
        "audit", registered=True, backfill=BackfillProgress(started, 0, None, None)
    )
    clock.advance(1)
    await store.backfill("audit", limit=1)
    [audit] = await store.consumer_stats()
    assert audit.backfill == BackfillProgress(started, 1, "a", None)
    done = clock.advance(1)
    for _ in range(2):  # "b", then (unless that batch saw the end) the batch finding none
        progress = await store.backfill("audit", limit=1)
        assert progress is not None
        if not progress.running:
            break
    [audit] = await store.consumer_stats()
    assert audit.backfill == BackfillProgress(started, 2, "b", done)
    await store.unregister_consumers(["audit"])
    assert all(s.backfill is None for s in await store.consumer_stats())


async def test_a_log_consumer_without_backfill_has_none(store: Store) -> None:
    await append(store, "a", ev("order"))
    await store.register_consumers([log_consumer("audit")])
    assert await store.consumer_stats() == [stats("audit", registered=True)]
