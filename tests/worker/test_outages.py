"""A store that stops answering for a while: the worker keeps its attempts and says so.

Completions and failures are re-sent until the store answers (never dropped, never
counted as failures), failed renewals are tried again, and the worker logs at least
once per poll interval while calls fail or hang. On every backend.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from a2pg import (
    CompletedAndClaimed,
    CompleteResult,
    Completion,
    Head,
    NewEvent,
    StoreUnavailable,
)
from a2pg.store import Store
from a2pg.worker import App, Worker
from a2pg.worker.health import StoreHealth

from .helpers import RecordingStore, bounded, until, work

POLL = 0.05


OUTAGES: dict[str, Callable[[str], Exception]] = {
    "connection-lost": ConnectionResetError,
    "store-unavailable": lambda text: StoreUnavailable(message=text),
}
"""What a call fails with while the store is down: a driver's error (PostgreSQL's), or the
store's own ``STORE_UNAVAILABLE`` (SqliteStore's file locked past its busy timeout): an
outage either way, never the store's answer."""


class Outage(RecordingStore):
    """Every worker call fails with a lost connection while ``down`` is set (the calls
    that fail are counted), or hangs while ``answering`` is clear."""

    def __init__(self, inner: Store, outage: str = "connection-lost") -> None:
        super().__init__(inner)
        self.error = OUTAGES[outage]
        self.down = False
        self.answering = asyncio.Event()
        self.answering.set()
        self.refused: dict[str, int] = {}

    async def _gate(self, name: str) -> None:
        await self.answering.wait()
        if self.down:
            self.refused[name] = self.refused.get(name, 0) + 1
            raise self.error(f"{name}: server closed the connection unexpectedly")

    async def claim_any(self, **options: Any) -> list[Head]:
        await self._gate("claim_any")
        return await super().claim_any(**options)

    async def complete_attempts(self, completions: Sequence[Completion]) -> list[CompleteResult]:
        await self._gate("complete_attempts")
        return await super().complete_attempts(completions)

    async def complete_and_claim(
        self, completions: Sequence[Completion], **options: Any
    ) -> CompletedAndClaimed:
        await self._gate("complete_and_claim" if completions else "claim_any")
        return await super().complete_and_claim(completions, **options)

    def completions_refused(self) -> int:
        """Completions go out alone or with the claim loop's next claim: either counts."""
        return self.refused.get("complete_attempts", 0) + self.refused.get("complete_and_claim", 0)

    async def renew_claims(self, session_id: str, **options: Any) -> Any:
        await self._gate("renew_claims")
        return await super().renew_claims(session_id, **options)

    async def fail_attempt(self, session_id: str, **options: Any) -> Any:
        await self._gate("fail_attempt")
        return await super().fail_attempt(session_id, **options)


@pytest.mark.parametrize("kind", list(OUTAGES))
async def test_completions_are_re_sent_until_the_store_answers(
    store: Store, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    caplog.set_level(logging.WARNING, logger="a2pg.worker")
    outage = Outage(store, kind)
    finished = asyncio.Event()
    app = App()

    @app.consumer("w")
    async def handle(head: Head) -> list[NewEvent]:
        outage.down = True  # the store goes away while the handler runs
        finished.set()
        return [NewEvent("done")]

    await store.append("s", [work(1)])
    worker = Worker(outage.as_store(), app, poll_interval=POLL, renew_interval=POLL)
    async with worker:
        await bounded(finished.wait())
        # far longer than the five re-sends (0.05 s doubling) a batch used to get
        await until(lambda: outage.completions_refused() >= 8)
        assert worker.stats.completed == 0 and worker.in_flight == 1
        outage.down = False
        await bounded(worker.wait_idle())
    assert (worker.stats.completed, worker.stats.failed) == (1, 0)
    assert [e.type for e in await store.read("s")] == ["job", "done"]
    assert outage.refused.get("renew_claims", 0) >= 1  # renewals failed too, harmlessly
    messages = [r.getMessage() for r in caplog.records]
    assert any("store call failed (" in m for m in messages)  # said at once
    assert any("no answer from the database" in m for m in messages)
    assert any("the database answers again" in m for m in messages)


@pytest.mark.parametrize("kind", list(OUTAGES))
async def test_a_failure_is_recorded_once_the_store_answers(store: Store, kind: str) -> None:
    outage = Outage(store, kind)
    app = App()

    @app.consumer("w")
    async def handle(head: Head) -> None:
        outage.down = True
        raise RuntimeError("boom")

    await store.append("s", [work(1)])
    worker = Worker(outage.as_store(), app, poll_interval=POLL, renew_interval=POLL)
    async with worker:
        await until(lambda: outage.refused.get("fail_attempt", 0) >= 3)
        outage.down = False
        await until(lambda: worker.stats.failed == 1)
    [cursor] = [c for c in await store.cursors("s") if c.consumer == "w"]
    assert (cursor.dispatch.failure_count, cursor.dispatch.attempt_count) == (1, 1)
    assert "boom" in (cursor.dispatch.last_error or "")


async def test_a_hanging_store_is_reported_every_poll_interval(
    memory: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="a2pg.worker")
    outage = Outage(memory)
    app = App()

    @app.consumer("w")
    async def handle(head: Head) -> None:
        outage.answering.clear()  # the store stops answering, without an error

    await memory.append("s", [work(1)])
    worker = Worker(outage.as_store(), app, poll_interval=POLL)
    async with worker:
        await until(lambda: not outage.answering.is_set())
        await asyncio.sleep(12 * POLL)
        outage.answering.set()
        await bounded(worker.wait_idle())
    waiting = [r for r in caplog.records if "waiting: complete_attempts for" in r.getMessage()]
    assert len(waiting) >= 6
    gaps = [b.created - a.created for a, b in itertools.pairwise(waiting)]
    assert max(gaps) < 2 * POLL
    assert worker.stats.completed == 1


def test_health_says_nothing_while_the_store_answers() -> None:
    now = [0.0]
    health = StoreHealth(1.0, clock=lambda: now[0])
    now[0] = 5.0
    health.report()
    assert health.reports == 0
    health.failed("claim_any", ConnectionError("refused"))
    assert (health.failing, health.reports) == (True, 1)
    now[0] = 5.5
    health.report()  # said half a second ago: nothing new to say yet
    assert health.reports == 1
    now[0] = 6.1
    health.report()
    assert health.reports == 2
    health.succeeded()
    now[0] = 9.0
    health.report()
    assert (health.failing, health.reports) == (False, 2)
