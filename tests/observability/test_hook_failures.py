"""An observer that raises never changes what the worker does: it is logged and ignored."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from a2pg.models import Head
from a2pg.store import Store
from a2pg.worker import App, Worker, WorkerHooks
from a2pg.worker.attempt import Attempt, WorkerStats

from ..worker.helpers import bounded, work


class Broken(Exception):
    pass


class RaisingHooks(WorkerHooks):
    """Raises from every hook: on entry, or on exit for the context managers."""

    def __init__(self, *, on_exit: bool) -> None:
        self.on_exit = on_exit

    def started(self, holder: str, consumers: Sequence[str]) -> None:
        raise Broken("started")

    def stopped(self, stats: WorkerStats) -> None:
        raise Broken("stopped")

    @contextlib.contextmanager
    def attempt(self, attempt: Attempt) -> Iterator[None]:
        if not self.on_exit:
            raise Broken("attempt enter")
        yield
        raise Broken("attempt exit")

    def dead_lettered_on_claim(self, head: Head) -> None:
        raise Broken("dead_lettered_on_claim")

    @contextlib.contextmanager
    def store_call(self, op: str) -> Iterator[None]:
        if not self.on_exit:
            raise Broken("store_call enter")
        yield
        raise Broken("store_call exit")

    def claimed(self, heads: int, limit: int) -> None:
        raise Broken("claimed")

    def completions_sent(self, size: int) -> None:
        raise Broken("completions_sent")

    def wakeup(self) -> None:
        raise Broken("wakeup")

    def poll(self) -> None:
        raise Broken("poll")


class Counting(WorkerHooks):
    """A well-behaved observer given after the broken one: it still sees every attempt."""

    def __init__(self) -> None:
        self.outcomes: list[Any] = []

    @contextlib.contextmanager
    def attempt(self, attempt: Attempt) -> Iterator[None]:
        yield
        self.outcomes.append(attempt.outcome)


@pytest.mark.parametrize("on_exit", [False, True], ids=["raises-on-entry", "raises-on-exit"])
async def test_a_raising_hook_does_not_break_the_worker(
    store: Store, on_exit: bool, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[int] = []
    await store.append("s", [work(1), work(2), work(3)])
    counting = Counting()
    worker = Worker(
        store,
        App({"w": lambda head: ran.append(head.index)}),
        hooks=[RaisingHooks(on_exit=on_exit), counting],
    )
    with caplog.at_level(logging.ERROR, logger="a2pg.worker.hooks"):
        await bounded(worker.run_until_idle())

    assert sorted(ran) == [1, 2, 3]
    assert counting.outcomes == ["completed"] * 3
    cursors = await store.cursors("s")
    assert all(c.head is None for c in cursors)
    assert any("Broken" in r.getMessage() or r.exc_info for r in caplog.records)


async def test_a_handler_error_still_reaches_the_worker_when_a_hook_raises_on_exit(
    store: Store,
) -> None:
    def fail(head: Head) -> None:
        raise ValueError("handler failed")

    await store.append("s", [work(1)])
    worker = Worker(store, App({"w": fail}), hooks=[RaisingHooks(on_exit=True)], max_failures=1)
    await bounded(worker.run_until_idle())
    dead = await store.dead_letters("s")
    assert [h.index for h in dead] == [1]
    assert (
        dead[0].dispatch.last_error is not None and "handler failed" in dead[0].dispatch.last_error
    )
