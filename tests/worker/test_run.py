"""Handlers run and complete: returned events appended with their cause, lanes in order, wakeups."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any, cast

from a2pg import AttemptRef, CompleteResult, Completion, Head, LogSpec, NewEvent, Target
from a2pg.ids import FakeClock
from a2pg.store import Store
from a2pg.worker import App, Worker
from a2pg.worker.app import returned_event_id

from ..backends import MakeStore
from .helpers import RecordingStore, bounded, until, work


async def test_returned_events_are_appended_with_their_cause(store: Store) -> None:
    app = App()
    heads: list[Head] = []

    @app.consumer("w")
    async def handle(head: Head) -> list[NewEvent]:
        heads.append(head)
        return [NewEvent("done", {"n": head.event.payload["n"]})]

    await store.append("s1", [work(1), work(2)])
    worker = Worker(store, app)
    await bounded(worker.run_until_idle())

    done = [e for e in await store.read("s1") if e.type == "done"]
    assert sorted(e.payload["n"] for e in done) == [1, 2]
    by_index = {h.index: h for h in heads}
    for event in done:
        source = by_index[event.payload["n"]]
        assert event.cause == AttemptRef("w", None, source.index, 1)
        assert event.id == returned_event_id(source, 0)
    assert (worker.stats.claimed, worker.stats.completed) == (2, 2)
    assert not (await store.append("s1", [])).has_pending


async def test_a_lane_runs_one_event_at_a_time_in_index_order(store: Store) -> None:
    app = App()
    order: dict[str, list[int]] = {"x": [], "y": []}
    running: dict[str, int] = {"x": 0, "y": 0}
    peak = {"x": 0, "y": 0, "all": 0}

    @app.consumer("w")
    async def handle(head: Head) -> None:
        lane = head.lane
        assert lane is not None
        running[lane] += 1
        peak[lane] = max(peak[lane], running[lane])
        peak["all"] = max(peak["all"], sum(running.values()))
        for _ in range(3):
            await asyncio.sleep(0)
        order[lane].append(head.event.payload["n"])
        running[lane] -= 1

    await store.append("s", [work(n, lane="x" if n % 2 else "y") for n in range(12)])
    worker = Worker(store, app, concurrency=10)
    await bounded(worker.run_until_idle())

    assert order == {"x": [1, 3, 5, 7, 9, 11], "y": [0, 2, 4, 6, 8, 10]}
    assert peak["x"] == peak["y"] == 1
    assert peak["all"] == 2  # the two lanes do run side by side
    assert worker.stats.completed == 12


async def test_work_created_by_completions_is_picked_up(store: Store) -> None:
    app = App()

    @app.consumer("first")
    async def first(head: Head) -> list[NewEvent]:
        return [NewEvent("next", targets=[Target("second")])]

    seen: list[int] = []

    @app.consumer("second")
    def second(head: Head) -> None:
        seen.append(head.index)

    await store.append("s", [NewEvent("go", targets=[Target("first")])])
    await bounded(Worker(store, app).run_until_idle())
    assert seen == [2]


async def test_sync_handlers_run_in_threads_side_by_side(memory: Store) -> None:
    app = App()
    barrier = threading.Barrier(3, timeout=5)
    threads: set[int] = set()

    @app.consumer("w")
    def handle(head: Head) -> list[NewEvent]:
        threads.add(threading.get_ident())
        barrier.wait()  # breaks (and fails the attempt) unless three run at once
        return [NewEvent("done")]

    await memory.append("s", [work(n) for n in range(3)])
    worker = Worker(memory, app, concurrency=3)
    await bounded(worker.run_until_idle())
    assert worker.stats.completed == 3 and worker.stats.failed == 0
    assert threading.get_ident() not in threads and len(threads) == 3


async def test_concurrency_limit_holds(memory: Store) -> None:
    proxy = RecordingStore(memory)
    app = App()
    gate = asyncio.Event()
    running = 0
    peak = 0

    @app.consumer("w")
    async def handle(head: Head) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await gate.wait()
        running -= 1

    await memory.append("s", [work(n) for n in range(10)])
    async with Worker(proxy.as_store(), app, concurrency=3, claim_batch=10) as worker:
        await until(lambda: running == 3)
        for _ in range(50):
            await asyncio.sleep(0)
        assert running == 3
        gate.set()
        await bounded(worker.wait_idle())
    assert peak == 3
    assert max(proxy.claim_limits) <= 3
    assert worker.stats.completed == 10


async def test_log_consumer_registered_at_start_gets_events_of_a_client_that_declared_nothing(
    make_store: MakeStore,
) -> None:
    store = await make_store()
    app = App()
    seen: list[tuple[str, int]] = []

    @app.consumer("audit", log=LogSpec(types=("order.placed",)))
    async def audit(head: Head) -> None:
        seen.append((head.session_id, head.index))

    async with Worker(store, app) as worker:
        assert [c.name for c in await store.registered_consumers()] == ["audit"]
        appender = await make_store()
        await appender.append(
            "shop", [NewEvent("order.placed"), NewEvent("page.viewed"), NewEvent("order.placed")]
        )
        await bounded(worker.wait_idle())
    assert seen == [("shop", 1), ("shop", 3)]


async def test_an_idle_worker_wakes_on_new_work_without_polling(store: Store) -> None:
    app = App()
    seen: list[int] = []

    @app.consumer("w")
    async def handle(head: Head) -> None:
        seen.append(head.index)

    async with Worker(store, app, poll_interval=60.0) as worker:
        await bounded(worker.wait_idle())
        await store.append("s", [work(1)])
        await until(lambda: seen == [1])


async def test_a_backoff_end_wakes_an_idle_worker(memory: Store, clock: FakeClock) -> None:
    from a2pg.backoff import Backoff

    app = App()
    calls: list[int] = []

    @app.consumer("w")
    async def flaky(head: Head) -> None:
        calls.append(head.attempt)
        if head.attempt == 1:
            raise RuntimeError("first time fails")

    backoff = Backoff(base=0.01, cap=0.01, jitter=0.0)
    async with Worker(memory, app, poll_interval=60.0, backoff=backoff) as worker:
        await memory.append("s", [work(1)])
        await until(lambda: worker.stats.failed == 1)
        await bounded(worker.wait_idle())  # the retry is not claimable yet
        clock.advance(1.0)  # store time passes; only the worker's own timer can notice
        await until(lambda: worker.stats.completed == 1, within=5.0)
    assert calls == [1, 2]


async def test_two_workers_share_the_work_once_each_and_lanes_stay_ordered(
    make_store: MakeStore,
) -> None:
    seen: list[tuple[str, int]] = []
    order: dict[str, list[int]] = {}

    async def handle(head: Head) -> list[NewEvent]:
        seen.append((head.session_id, head.index))
        if head.lane is not None:
            order.setdefault(f"{head.session_id}/{head.lane}", []).append(head.index)
        await asyncio.sleep(0)
        return [NewEvent("done")]

    first, second = await make_store(), await make_store()
    for s in range(8):
        await first.append(f"s{s}", [work(n, lane="l" if n % 3 else None) for n in range(12)])
    workers = [
        Worker(first, App({"w": handle}), concurrency=4, holder="one"),
        Worker(second, App({"w": handle}), concurrency=3, holder="two"),
    ]
    await bounded(asyncio.gather(*(w.run_until_idle() for w in workers)))
    for w in workers:  # one may have stopped while the other's completions made work
        await bounded(w.run_until_idle())
    assert len(seen) == len(set(seen)) == 8 * 12
    assert sum(w.stats.completed for w in workers) == 8 * 12
    assert all(indexes == sorted(indexes) for indexes in order.values())


class StaleSnapshotClaims(RecordingStore):
    """Answers each claim from a snapshot taken before a few task switches, as a claim
    statement on PostgreSQL answers from a snapshot taken before commits that land while
    it runs; completions go through only after a few switches of their own."""

    async def claim_any(self, **options: Any) -> list[Head]:
        heads = await self.inner.claim_any(**options)
        for _ in range(50):
            await asyncio.sleep(0)
        return heads

    async def complete_attempts(self, completions: Sequence[Completion]) -> list[CompleteResult]:
        for _ in range(5):
            await asyncio.sleep(0)
        return await self.inner.complete_attempts(completions)


async def test_work_a_completion_creates_during_a_claim_is_not_missed(memory: Store) -> None:
    """run_until_idle must not call the worker idle on a claim whose snapshot predates a
    completion that committed while it ran: that completion may have made new work."""
    app = App()
    audited: list[int] = []

    @app.consumer("reply")
    async def reply(head: Head) -> list[NewEvent]:
        return [NewEvent("answer", {"to": head.index})]

    @app.consumer("audit", log=LogSpec(types=("answer",)))
    async def audit(head: Head) -> None:
        audited.append(head.index)

    store = StaleSnapshotClaims(memory)
    await memory.append("s", [NewEvent("question", targets=[Target("reply", "turns")])])
    await bounded(Worker(cast(Store, store), app).run_until_idle())
    assert audited == [2]
