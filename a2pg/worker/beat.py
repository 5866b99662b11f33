"""The worker's heartbeat: tells the store it is alive at start and every interval, and
forgets it when it stops cleanly, so ``Store.workers()`` lists the workers running now."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from functools import cache
from importlib import metadata

from ..models import WorkerBeat
from ..store import Store
from .attempt import WorkerStats
from .health import StoreHealth, refused
from .hooks import WorkerHooks

log = logging.getLogger("a2pg.worker")


@cache
def package_version() -> str:
    """The installed a2pg's version (the worker cannot import the package root's)."""
    try:
        return metadata.version("a2pg")
    except metadata.PackageNotFoundError:  # run from a source tree never installed
        return "unknown"


MIN_DEADLINE = 1.0
"""The least time a beat is given to answer, whatever the interval (tests beat every few
milliseconds; a loaded database may take longer than that to answer one)."""


class Heartbeat:
    """Sends ``describe()`` to ``store.heartbeat`` at ``start`` and every ``interval`` seconds
    until ``close``, which then drops the worker's row.

    A beat that fails is never fatal: it counts in ``stats.store_errors`` and the
    worker's ``health`` logs the outage as for any store call; one the store refuses
    (an ``A2Error``: a holder name over its limits, say) is logged once. A beat with no
    answer within ``interval`` (``MIN_DEADLINE`` at least: a lock held on the workers'
    table, a connection gone silent) is abandoned, cancelled, and logged once until a
    beat lands again; the next beat goes at its time all the same. ``close`` cuts no
    beat short but one past its deadline, so none but an abandoned one can land after
    the row was dropped (the row then goes stale, as a killed worker's). Each beat is told
    to ``hooks.beat`` as it goes (what a liveness probe watches: the loop still runs).
    """

    def __init__(
        self,
        store: Store,
        describe: Callable[[], WorkerBeat],
        *,
        interval: float,
        health: StoreHealth,
        stats: WorkerStats,
        hooks: WorkerHooks | None = None,
    ) -> None:
        self._hooks = hooks or WorkerHooks()
        self._store = store
        self._describe = describe
        self._interval = interval
        self._health = health
        self._stats = stats
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._refusal_said = False
        self._hang_said = False
        self.deadline = max(interval, MIN_DEADLINE)
        """Seconds a beat may wait for the store's answer before it is abandoned."""
        self.sent = 0
        """Beats the store took (for tests and stats)."""
        self.abandoned = 0
        """Beats abandoned past their deadline (for tests and stats)."""

    async def start(self) -> None:
        """Starts beating in the background, the first beat at once: a store slow to take
        it (a lock on the workers' table, a database that stopped answering) must not
        hold back the worker's start, and with it its claims."""
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="a2pg-worker-heartbeat")

    async def send(self) -> None:
        beat = self._describe()
        # Outside the health's call: an abandoned beat is a cancelled call there, not a
        # failed one (other calls may be answering; the store is not down for a hung beat).
        deadline = asyncio.timeout(self.deadline)
        try:
            async with deadline, self._health.call("heartbeat"):
                await self._store.heartbeat(beat)
        except Exception as error:
            if refused(error):  # the store's answer (STORE_UNAVAILABLE is an outage)
                if not self._refusal_said:
                    log.warning("the store refuses this worker's heartbeat: %s", error)
                    self._refusal_said = True
                return
            self._stats.store_errors += 1
            if isinstance(error, TimeoutError) and deadline.expired():
                self.abandoned += 1
                if not self._hang_said:
                    log.warning(
                        "a heartbeat got no answer within %.1fs: abandoned (the next goes on "
                        "time; said once until one lands)",
                        self.deadline,
                    )
                    self._hang_said = True
            else:  # the health logs it, once per poll interval
                log.debug("heartbeat failed", exc_info=True)
        else:
            self.sent += 1
            self._hang_said = False

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self._interval  # beats keep their pace, slow answers or not
            self._hooks.beat(self.deadline)  # the next within max(interval, deadline)
            await self.send()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), max(0.0, due - loop.time()))
            if self._stop.is_set():
                return

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
