"""The worker's heartbeat: tells the store it is alive at start and every interval, and
forgets it when it stops cleanly, so ``Store.workers()`` lists the workers running now."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from functools import cache
from importlib import metadata

from ..errors import A2Error
from ..models import WorkerBeat
from ..store import Store
from .attempt import WorkerStats
from .health import StoreHealth

log = logging.getLogger("a2pg.worker")


@cache
def package_version() -> str:
    """The installed a2pg's version (the worker cannot import the package root's)."""
    try:
        return metadata.version("a2pg")
    except metadata.PackageNotFoundError:  # run from a source tree never installed
        return "unknown"


class Heartbeat:
    """Sends ``describe()`` to ``store.heartbeat`` at ``start`` and every ``interval`` seconds
    until ``close``, which then drops the worker's row.

    A beat that fails is never fatal: it counts in ``stats.store_errors`` and the
    worker's ``health`` logs the outage as for any store call; one the store refuses
    (an ``A2Error``: a holder name over its limits, say) is logged once. Beats are
    never cut short, so none can land after the row was dropped.
    """

    def __init__(
        self,
        store: Store,
        describe: Callable[[], WorkerBeat],
        *,
        interval: float,
        health: StoreHealth,
        stats: WorkerStats,
    ) -> None:
        self._store = store
        self._describe = describe
        self._interval = interval
        self._health = health
        self._stats = stats
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._refusal_said = False
        self.sent = 0
        """Beats the store took (for tests and stats)."""

    async def start(self) -> None:
        """Starts beating in the background, the first beat at once: a store slow to take
        it (a lock on the workers' table, a database that stopped answering) must not
        hold back the worker's start, and with it its claims."""
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="a2pg-worker-heartbeat")

    async def send(self) -> None:
        beat = self._describe()
        try:
            async with self._health.call("heartbeat"):
                await self._store.heartbeat(beat)
        except A2Error as refused:
            if not self._refusal_said:
                log.warning("the store refuses this worker's heartbeat: %s", refused)
                self._refusal_said = True
        except Exception:
            self._stats.store_errors += 1  # the health logs it, once per poll interval
            log.debug("heartbeat failed", exc_info=True)
        else:
            self.sent += 1

    async def _run(self) -> None:
        await self.send()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self._interval)
            if self._stop.is_set():
                return
            await self.send()

    async def close(self, holder: str, *, within: float) -> None:
        """Stops beating (a beat under way may finish, for ``within`` seconds at most), then
        drops ``holder``'s row, waiting ``within`` seconds at most: a worker that cannot
        reach the store stops all the same, and its row goes stale."""
        self._stop.set()
        task, self._task = self._task, None
        if task is not None:
            done, _ = await asyncio.wait([task], timeout=within)
            if not done:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        try:
            async with asyncio.timeout(within), self._health.call("forget_workers"):
                await self._store.forget_workers([holder])
        except Exception as error:
            self._stats.store_errors += 1
            log.warning("could not drop this worker's heartbeat row (%r): it goes stale", error)
