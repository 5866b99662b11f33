"""heartbeat / workers / forget_workers: each worker's last beat at the store's time, how long
ago it was seen, when it turns stale, and forgetting it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from a2pg import WorkerBeat, WorkerInfo
from a2pg.ids import FakeClock
from a2pg.store import Store

WORKER_CLOCK_SKEW = timedelta(hours=-3)
"""The worker's own clock is off: the store keeps its own times anyway."""


def beat(clock: FakeClock, holder: str = "w-1", **changes: object) -> WorkerBeat:
    base = WorkerBeat(
        holder=holder,
        host="box",
        pid=42,
        consumers=("mail", "bill"),
        concurrency=8,
        started_at=clock() + WORKER_CLOCK_SKEW,
        in_flight=3,
        version="0.1.0",
        interval=5.0,
        completed=10,
        failed=1,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


async def test_no_workers_at_first(store: Store) -> None:
    assert await store.workers() == []


async def test_a_beat_is_kept_at_the_stores_time(store: Store, clock: FakeClock) -> None:
    sent = beat(clock)
    await store.heartbeat(sent)
    [info] = await store.workers()
    assert info == WorkerInfo(replace(sent, started_at=clock()), clock(), 0.0)
    assert not info.stale


async def test_seen_ago_grows_until_three_missed_beats_make_it_stale(
    store: Store, clock: FakeClock
) -> None:
    await store.heartbeat(beat(clock, interval=5.0))
    clock.advance(15)
    [info] = await store.workers()
    assert (info.seen_ago, info.stale) == (15.0, False)
    clock.advance(0.5)
    [info] = await store.workers()
    assert (info.seen_ago, info.stale) == (15.5, True)


async def test_a_new_beat_replaces_the_row_and_keeps_its_start(
    store: Store, clock: FakeClock
) -> None:
    started = clock()
    await store.heartbeat(beat(clock))
    clock.advance(4)
    later = beat(clock, consumers=("mail",), in_flight=0, completed=25, failed=2, interval=2.5)
    await store.heartbeat(later)
    assert await store.workers() == [WorkerInfo(replace(later, started_at=started), clock(), 0.0)]


async def test_a_beat_from_another_process_under_the_same_holder_starts_again(
    store: Store, clock: FakeClock
) -> None:
    await store.heartbeat(beat(clock))
    restarted = clock.advance(4)
    await store.heartbeat(beat(clock, pid=43))
    [info] = await store.workers()
    assert (info.beat.pid, info.beat.started_at) == (43, restarted)


async def test_workers_come_by_holder_and_forgetting_drops_only_those_named(
    store: Store, clock: FakeClock
) -> None:
    for holder in ("w-b", "w-a", "w-c"):
        await store.heartbeat(beat(clock, holder))
    assert [w.beat.holder for w in await store.workers()] == ["w-a", "w-b", "w-c"]
    await store.forget_workers(["w-b", "w-unknown"])
    assert [w.beat.holder for w in await store.workers()] == ["w-a", "w-c"]
    await store.forget_workers([])
    assert [w.beat.holder for w in await store.workers()] == ["w-a", "w-c"]


async def test_a_worker_may_serve_no_consumer_and_count_from_zero(
    store: Store, clock: FakeClock
) -> None:
    sent = beat(clock, consumers=(), pid=0, concurrency=0, in_flight=0, completed=0, failed=0)
    await store.heartbeat(sent)
    [info] = await store.workers()
    assert info.beat == replace(sent, started_at=clock())
