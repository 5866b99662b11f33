"""One task per attempt: the handler runs in it, then its settlement; observers that watch
nothing now cost nothing, and an idle worker sleeps."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from a2pg import A2Error, Completion, Head, NewEvent
from a2pg.store import Store
from a2pg.worker import App, Worker, WorkerHooks
from a2pg.worker.attempt import Attempt, _completion
from a2pg.worker.attempt_log import AttemptLog
from a2pg.worker.health import StoreHealth
from a2pg.worker.hooks import Guarded, HookSet

from .helpers import RecordingStore, bounded, until, work

SPAN: contextvars.ContextVar[str | None] = contextvars.ContextVar("span", default=None)


async def test_the_handler_runs_in_the_attempts_own_task(memory: Store) -> None:
    seen: list[asyncio.Task[Any] | None] = []

    async def handler(head: Head) -> None:
        seen.append(asyncio.current_task())

    await memory.append("s", [work(1, lane="l"), work(2)])
    worker = Worker(memory, App({"w": handler}))
    before = asyncio.all_tasks()
    await bounded(worker.run_until_idle())
    assert sorted(t.get_name() for t in seen if t is not None) == [
        "a2pg-attempt s:w/l@1#1",
        "a2pg-attempt s:w@2#1",
    ]
    assert all(t not in before for t in seen)
    assert worker.stats.completed == 2


class Swallowing:
    """A handler that ignores being cancelled and returns anyway."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.cancelled = 0
        self.started = 0

    async def __call__(self, head: Head) -> list[NewEvent]:
        self.started += 1
        if head.event.payload["n"] == 1:
            try:
                await self.gate.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
        return [NewEvent("late", {"n": head.event.payload["n"]})]


class Cancelling(WorkerHooks):
    """Records, as each attempt ends, whether its task is still being cancelled."""

    def __init__(self) -> None:
        self.ends: list[tuple[Any, int]] = []

    @contextlib.contextmanager
    def attempt(self, attempt: Attempt) -> Iterator[None]:
        yield
        task = asyncio.current_task()
        self.ends.append((attempt.outcome, -1 if task is None else task.cancelling()))


async def test_a_superseded_handler_that_swallows_the_cancel_is_still_superseded(
    store: Store,
) -> None:
    handler = Swallowing()
    ends = Cancelling()
    async with Worker(store, App({"w": handler}), hooks=ends) as worker:
        await store.append("s", [work(1)])
        await until(lambda: handler.started == 1)
        await store.clear("s")
        await worker.renew_leases(force=True)
        await until(lambda: worker.stats.superseded == 1)
        assert handler.cancelled == 1
        await store.append("t", [work(2)])  # the worker goes on as before
        await until(lambda: worker.stats.completed == 1)
        await bounded(worker.wait_idle())
    assert "late" not in [e.type for e in await store.read("s")]
    assert [e.type for e in await store.read("t")] == ["job", "late"]
    assert ends.ends == [("superseded", 0), ("completed", 0)]  # the worker's cut taken back


async def test_a_handler_that_swallows_the_shutdowns_cancel_completes(memory: Store) -> None:
    handler = Swallowing()
    proxy = RecordingStore(memory)
    worker = Worker(proxy.as_store(), App({"w": handler}))
    await memory.append("s", [work(1)])
    running = asyncio.create_task(worker.run())
    await until(lambda: handler.started == 1)
    worker.stop(force=True)
    await bounded(running)
    assert handler.cancelled == 1
    assert (worker.stats.completed, worker.stats.released) == (1, 0)
    assert proxy.releases == []
    assert [e.type for e in await memory.read("s")] == ["job", "late"]


async def test_a_worker_cancelled_outright_still_cancels_a_handler_that_swallowed_its_cut(
    memory: Store,
) -> None:
    """The worker's own cancellations are taken back once delivered; a caller's is not."""

    class Stubborn:
        def __init__(self) -> None:
            self.cancels = 0

        async def __call__(self, head: Head) -> None:
            while True:
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    self.cancels += 1
                    if self.cancels > 1:
                        raise

    handler = Stubborn()
    worker = Worker(memory, App({"w": handler}), cleanup_timeout=0.05)
    await memory.append("s", [work(1)])
    running = asyncio.create_task(worker.run())
    await until(lambda: worker.in_flight == 1)
    await asyncio.sleep(0.01)
    worker.stop(force=True)  # release: one cancel, swallowed; then given up: another
    await bounded(running)
    assert handler.cancels == 2
    assert worker.stats.released == 1 and worker.stats.completed == 0


# -------------------------------------------------------------- observers' fast paths


class Watching(WorkerHooks):
    """Watches attempts and store calls only while ``on``; the handler sees its span."""

    def __init__(self) -> None:
        self.on = False
        self.attempts: list[Any] = []
        self.calls: list[str] = []

    def watches_attempts(self) -> bool:
        return self.on

    def watches_store_calls(self) -> bool:
        return self.on

    @contextlib.contextmanager
    def attempt(self, attempt: Attempt) -> Iterator[None]:
        token = SPAN.set(attempt.describe())
        try:
            yield
        finally:
            SPAN.reset(token)
            self.attempts.append(attempt.outcome)

    @contextlib.contextmanager
    def store_call(self, op: str) -> Iterator[None]:
        self.calls.append(op)
        yield


async def test_hooks_run_only_while_they_watch(memory: Store) -> None:
    spans: list[str | None] = []

    async def handler(head: Head) -> None:
        spans.append(SPAN.get())

    hook = Watching()
    worker = Worker(memory, App({"w": handler}), hooks=hook)
    await memory.append("s", [work(1)])
    await bounded(worker.run_until_idle())
    assert (hook.attempts, hook.calls, spans) == ([], [], [None])

    hook.on = True
    await memory.append("s", [work(2)])
    await bounded(worker.run_until_idle())
    assert hook.attempts == ["completed"]
    assert spans == [None, "s:w@2#1"]  # the handler ran inside the hook's attempt()
    assert "claim_any" in hook.calls or "complete_and_claim" in hook.calls


def test_which_hooks_watch() -> None:
    class Counting(WorkerHooks):
        def claimed(self, heads: int, limit: int) -> None:
            pass

    class Timing(WorkerHooks):
        @contextlib.contextmanager
        def attempt(self, attempt: Attempt) -> Iterator[None]:
            yield

    assert not WorkerHooks().watches_attempts() and not WorkerHooks().watches_store_calls()
    assert not Counting().watches_attempts() and not Counting().watches_store_calls()
    assert Timing().watches_attempts() and not Timing().watches_store_calls()
    assert HookSet([Counting(), Timing()]).watches_attempts()
    assert not HookSet([Counting(), Guarded(Counting())]).watches_attempts()
    assert Guarded(Timing()).watches_attempts()

    attempts = logging.getLogger("a2pg.worker.attempts")
    level = attempts.level
    try:
        attempts.setLevel(logging.INFO)
        assert not AttemptLog().watches_attempts()
        attempts.setLevel(logging.DEBUG)
        assert AttemptLog().watches_attempts()
    finally:
        attempts.setLevel(level)


def test_a_hook_that_cannot_say_whether_it_watches_is_run_guarded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Confused(WorkerHooks):
        def watches_attempts(self) -> bool:
            raise RuntimeError("no idea")

        def watches_store_calls(self) -> bool:
            raise RuntimeError("no idea")

    guarded = Guarded(Confused())
    with caplog.at_level(logging.ERROR, logger="a2pg.worker.hooks"):
        assert guarded.watches_attempts() and guarded.watches_store_calls()
    assert any("watches_attempts" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("watched", [False, True], ids=["unwatched", "watched"])
async def test_store_health_counts_calls_the_same_watched_or_not(watched: bool) -> None:
    hook = Watching()
    hook.on = watched
    health = StoreHealth(1.0, hooks=hook)
    with pytest.raises(ConnectionError):
        async with health.call("claim_any"):
            raise ConnectionError("gone")
    assert health.failing
    with pytest.raises(A2Error):  # the store's answer: it is reachable again
        async with health.call("claim_any"):
            raise A2Error("INVALID_ARGUMENT", "no")
    assert not health.failing
    with pytest.raises(KeyError):  # any other exception: a failed call
        async with health.call("claim_any"):
            raise KeyError("x")
    assert health.failing
    async with health.call("claim_any"):
        assert len(health._calls) == 1
    assert not health.failing and health._calls == {}
    with pytest.raises(asyncio.CancelledError):
        async with health.call("renew_claims"):
            raise asyncio.CancelledError
    assert not health.failing and health._calls == {}
    assert hook.calls == (["claim_any"] * 4 + ["renew_claims"] if watched else [])


def test_completions_are_built_without_their_init() -> None:
    """A field added to ``Completion`` turns the fast constructor off (it would leave the
    field unset): then update its names in ``worker/attempt.py``."""
    assert _completion.__name__ == "completion"
    built = _completion(("s", "c", "l", 3, 2), ())
    assert built == Completion("s", "c", "l", 3, 2, (), None)
    assert hash(built) == hash(Completion("s", "c", "l", 3, 2, (), None))
    events = (NewEvent("t", id="i"),)
    assert _completion(("s", "c", None, 1, 1), events).events is events


async def test_an_idle_worker_sleeps_between_polls(memory: Store) -> None:
    proxy = RecordingStore(memory)
    worker = Worker(proxy.as_store(), App({"w": lambda head: None}), poll_interval=0.05)
    async with worker:
        await asyncio.sleep(0.3)
        claims = len(proxy.claim_limits)
    assert 2 <= claims <= 10  # one claim per poll interval, not a loop
