"""Whether a worker reaches its store: said at once, then at least once per poll interval."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from types import TracebackType

from ..errors import A2Error, StoreUnavailable
from .hooks import WorkerHooks

log = logging.getLogger("a2pg.worker")

Clock = Callable[[], float]


def refused(error: BaseException) -> bool:
    """Whether ``error`` is the store's answer to the call (an ``A2Error``: bad input, a
    cleared session...), not an outage. ``STORE_UNAVAILABLE`` is an outage like a driver's
    error: SqliteStore's file locked past its busy timeout, any store once closed."""
    return isinstance(error, A2Error) and not isinstance(error, StoreUnavailable)


@dataclass(slots=True)
class _Call:
    what: str
    started: float


class StoreHealth:
    """Watches a worker's store calls so it never sits silent while the database is away.

    Every store call runs inside ``call(what)``. A call that fails (other than with an
    ``A2Error``, which is the store answering, but ``STORE_UNAVAILABLE``: see
    ``refused``) is logged at once as a WARNING; then,
    while calls keep failing or one hangs (a blackholed or half-open connection),
    ``report()``, called every ``every`` seconds by ``watch()``, logs one WARNING line
    saying for how long and what waits. The first success after that says the
    database answers again. Each call also runs inside ``hooks.store_call(what)`` (round-trip
    metrics, a span per call).
    """

    def __init__(
        self, every: float, *, clock: Clock | None = None, hooks: WorkerHooks | None = None
    ) -> None:
        self.every = every
        self._clock = clock
        self._hooks = hooks or WorkerHooks()
        self._ids = itertools.count()
        self._calls: dict[int, _Call] = {}
        self._failing_since: float | None = None
        self._last_error = ""
        self._last_said = float("-inf")
        self.reports = 0
        """WARNING lines logged about the store being unreachable (for tests and stats)."""

    @property
    def failing(self) -> bool:
        return self._failing_since is not None

    def _now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    def call(self, what: str) -> AbstractAsyncContextManager[None]:
        """Wraps one store call: its failure or success updates the health."""
        if self._hooks.watches_store_calls():
            return self._watched(what)
        return _Unwatched(self, what)

    @contextlib.asynccontextmanager
    async def _watched(self, what: str) -> AsyncIterator[None]:
        """``call`` inside ``hooks.store_call``: an exception the hook raises or swallows
        is what the call did."""
        key = next(self._ids)
        self._calls[key] = _Call(what, self._now())
        try:
            with self._hooks.store_call(what):
                yield
        except Exception as error:
            if refused(error):
                self.succeeded()
            else:
                self.failed(what, error)
            raise
        else:
            self.succeeded()
        finally:
            del self._calls[key]

    def failed(self, what: str, error: BaseException) -> None:
        now = self._now()
        self._last_error = f"{what}: {describe(error)}"
        if self._failing_since is None:
            self._failing_since = now
            self._say(now, f"store call failed ({self._last_error}); retrying")

    def succeeded(self) -> None:
        since, self._failing_since = self._failing_since, None
        if since is not None:
            log.warning("the database answers again (after %.1fs)", self._now() - since)
            self._last_said = float("-inf")

    def report(self) -> None:
        """Logs one line if calls fail or hang and nothing was said for ``every`` seconds."""
        now = self._now()
        if now - self._last_said < self.every * 0.9:
            return
        hung = sorted(
            (now - c.started, c.what) for c in self._calls.values() if now - c.started >= self.every
        )
        if self._failing_since is None and not hung:
            return
        waiting = ", ".join(f"{what} for {age:.1f}s" for age, what in reversed(hung))
        if self._failing_since is not None:
            text = f"no answer from the database for {now - self._failing_since:.1f}s"
            text += f" (last error: {self._last_error})"
        else:
            text = "waiting for the database"
        self._say(now, f"{text}; waiting: {waiting}" if waiting else text)

    async def watch(self) -> None:
        """Calls ``report()`` every ``every`` seconds, until cancelled."""
        while True:
            await asyncio.sleep(self.every)
            self.report()

    def _say(self, now: float, text: str) -> None:
        self._last_said = now
        self.reports += 1
        log.warning("%s", text)


class _Unwatched:
    """``StoreHealth.call`` when no hook watches store calls: ``_watched`` without the hook,
    and without a generator."""

    __slots__ = ("_health", "_key", "_what")

    def __init__(self, health: StoreHealth, what: str) -> None:
        self._health = health
        self._what = what
        self._key = -1

    async def __aenter__(self) -> None:
        health = self._health
        key = self._key = next(health._ids)
        health._calls[key] = _Call(self._what, health._now())

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        health = self._health
        try:
            if exc is None or refused(exc):  # the store's answer
                health.succeeded()
            elif isinstance(exc, Exception):
                health.failed(self._what, exc)
        finally:
            del health._calls[self._key]


def describe(error: BaseException) -> str:
    """An error on one line: its type and the first line of its message."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


@contextlib.asynccontextmanager
async def heartbeat(what: Callable[[float], str], every: float) -> AsyncIterator[None]:
    """Logs ``what(seconds so far)`` as a WARNING every ``every`` seconds while the block runs
    (a connection attempt into a blackhole must not be silent either)."""
    loop = asyncio.get_running_loop()
    started = loop.time()

    async def beat() -> None:
        while True:
            await asyncio.sleep(every)
            log.warning("%s", what(loop.time() - started))

    task = asyncio.create_task(beat(), name="a2pg-heartbeat")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
