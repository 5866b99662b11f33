"""Worker heartbeats: a running worker is in ``store.workers()`` with what it is doing, gone
after a clean stop; a failing or refused heartbeat never stops the work."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from typing import Any, cast

import pytest

import a2pg
from a2pg import A2Error, Head, WorkerBeat, WorkerInfo
from a2pg.front import CheckedStore, StoreProxy
from a2pg.store import Store
from a2pg.worker import App, Worker
from a2pg.worker.beat import MIN_DEADLINE

from .helpers import bounded, until, work

BEAT = 0.02
"""A heartbeat interval short enough that the tests see several beats at once."""


async def seen(store: Store, wanted: Callable[[list[WorkerInfo]], bool]) -> list[WorkerInfo]:
    """``store.workers()`` once ``wanted`` holds of it, polled for at most TIMEOUT seconds."""

    async def poll() -> list[WorkerInfo]:
        while not wanted(listed := await store.workers()):  # noqa: ASYNC110 - polls the store
            await asyncio.sleep(BEAT / 2)
        return listed

    return cast(list[WorkerInfo], await bounded(poll()))


def echo_app(gate: asyncio.Event | None = None) -> App:
    app = App()

    @app.consumer("w")
    async def handle(head: Head) -> None:
        if gate is not None:
            await gate.wait()

    @app.consumer("other")
    async def other(head: Head) -> None:
        return None

    return app


async def test_a_running_worker_is_listed_with_what_it_does_and_gone_once_stopped(
    store: Store,
) -> None:
    gate = asyncio.Event()
    worker = Worker(store, echo_app(gate), concurrency=3, heartbeat_interval=BEAT)
    await store.append("s", [work(1), work(2)])
    async with worker:
        [busy] = await seen(store, lambda ws: bool(ws) and ws[0].beat.in_flight == 2)
        assert busy.beat == WorkerBeat(
            holder=worker.holder,
            host=socket.gethostname(),
            pid=os.getpid(),
            consumers=("w", "other"),
            concurrency=3,
            started_at=busy.beat.started_at,
            in_flight=2,
            version=a2pg.__version__,
            interval=BEAT,
            completed=0,
            failed=0,
        )
        gate.set()
        [done] = await seen(store, lambda ws: bool(ws) and ws[0].beat.completed == 2)
        assert (done.beat.in_flight, done.beat.started_at) == (0, busy.beat.started_at)
    assert await store.workers() == []


async def test_failures_are_counted_in_the_beat(store: Store) -> None:
    app = App()

    @app.consumer("w")
    async def handle(head: Head) -> None:
        raise RuntimeError("no")

    await store.append("s", [work(1)])
    worker = Worker(store, app, max_failures=1, heartbeat_interval=BEAT)
    async with worker:
        [info] = await seen(store, lambda ws: bool(ws) and ws[0].beat.failed == 1)
        assert info.beat.completed == 0


async def test_run_until_idle_beats_once_and_forgets_the_worker(store: Store) -> None:
    beats: list[WorkerBeat] = []

    class Watching:
        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        async def heartbeat(self, beat: WorkerBeat) -> None:
            beats.append(beat)
            await store.heartbeat(beat)

    await store.append("s", [work(1)])
    worker = Worker(cast(Store, Watching()), echo_app())  # the default interval: 10 s
    await bounded(worker.run_until_idle())
    assert [b.holder for b in beats] == [worker.holder]
    assert await store.workers() == []


class FailingBeats:
    """A real store whose heartbeats fail (a lost connection) or are refused."""

    def __init__(self, inner: Store, error: Exception) -> None:
        self.inner = inner
        self.error = error
        self.tries = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def heartbeat(self, beat: WorkerBeat) -> None:
        self.tries += 1
        raise self.error


@pytest.mark.parametrize(
    "error",
    [ConnectionError("server closed the connection"), A2Error("INVALID_ARGUMENT", "too long")],
    ids=["lost", "refused"],
)
async def test_a_failing_heartbeat_never_stops_the_work(
    store: Store, caplog: pytest.LogCaptureFixture, error: Exception
) -> None:
    caplog.set_level(logging.WARNING, logger="a2pg.worker")
    failing = FailingBeats(store, error)
    worker = Worker(cast(Store, failing), echo_app(), heartbeat_interval=BEAT, poll_interval=0.05)
    await store.append("s", [work(1), work(2)])
    async with worker:
        await until(lambda: worker.stats.completed == 2 and failing.tries >= 3)
    messages = [r.getMessage() for r in caplog.records]
    if isinstance(error, A2Error):
        refusals = [m for m in messages if "refuses this worker's heartbeat" in m]
        assert len(refusals) == 1, messages
    else:
        assert worker.stats.store_errors >= 3
        assert any("store call failed (heartbeat: ConnectionError" in m for m in messages)
    assert await store.workers() == []


class StuckStore:
    """A real store whose later heartbeats hang and whose forget_workers fails: a database
    that stopped answering while the worker stops."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.beats = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def heartbeat(self, beat: WorkerBeat) -> None:
        self.beats += 1
        if self.beats > 1:
            await asyncio.Event().wait()  # never answers
        await self.inner.heartbeat(beat)

    async def forget_workers(self, holders: Any) -> None:
        raise ConnectionError("server closed the connection")


async def test_a_worker_stops_even_when_its_last_beats_cannot_reach_the_store(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="a2pg.worker")
    stuck = StuckStore(store)
    worker = Worker(cast(Store, stuck), echo_app(), heartbeat_interval=BEAT, cleanup_timeout=0.2)
    async with worker:
        await until(lambda: stuck.beats >= 2)  # the second beat hangs
    messages = [r.getMessage() for r in caplog.records]
    assert any("could not drop this worker's heartbeat row" in m for m in messages), messages
    [left] = await store.workers()  # stale in time, as a killed worker's
    assert left.beat.holder == worker.holder


class SilentStore:
    """A real store whose heartbeats never answer (a lock held on the workers' table, a
    server that stopped answering that one statement)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.beats = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def heartbeat(self, beat: WorkerBeat) -> None:
        self.beats += 1
        await asyncio.Event().wait()  # never answers


async def test_a_first_heartbeat_that_hangs_never_holds_back_claims(store: Store) -> None:
    silent = SilentStore(store)
    worker = Worker(cast(Store, silent), echo_app(), heartbeat_interval=BEAT, cleanup_timeout=0.2)
    await store.append("s", [work(1), work(2)])
    await bounded(worker.__aenter__())
    try:
        await until(lambda: worker.stats.completed == 2 and silent.beats >= 1)
    finally:
        await bounded(worker.__aexit__(None, None, None))
    assert await store.workers() == []


class HangingBeats(StoreProxy):
    """A real store whose second and third heartbeats never answer (a lock held on the
    workers' table for a while, a connection that went silent), then answer again."""

    def __init__(self, inner: CheckedStore) -> None:
        super().__init__(inner)
        self.beats = 0
        self.landed = 0

    async def _heartbeat(self, beat: WorkerBeat) -> None:
        self.beats += 1
        if self.beats in (2, 3):
            await asyncio.Event().wait()  # never answers
        await super()._heartbeat(beat)
        self.landed += 1


async def test_a_later_heartbeat_that_hangs_is_abandoned_and_the_next_goes_on(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """The first beat was bounded already; a later one hung the beats for good (the worker
    went stale in ``workers()`` while it worked on)."""
    caplog.set_level(logging.WARNING, logger="a2pg.worker")
    hanging = HangingBeats(cast(CheckedStore, store))
    interval = 0.2
    worker = Worker(hanging, echo_app(), heartbeat_interval=interval, cleanup_timeout=0.5)
    async with worker:
        await until(lambda: hanging.landed >= 3)  # 1, then 4 and 5: 2 and 3 were abandoned
        [info] = await seen(store, lambda ws: len(ws) == 1)
        assert info.beat.holder == worker.holder
    heartbeat_lines = [
        r.getMessage() for r in caplog.records if "heartbeat got no answer" in r.getMessage()
    ]
    assert heartbeat_lines == [
        f"a heartbeat got no answer within {MIN_DEADLINE:.1f}s: abandoned (the next goes on "
        "time; said once until one lands)"
    ]
    assert worker.stats.store_errors >= 2
    assert await store.workers() == []
