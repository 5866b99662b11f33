"""A store's live feeds: streams of events and wakeups, fed by signals from one source.

Every backend hands out the same feeds; they differ only in how they learn of commits
(LISTEN and a poll on PostgreSQL, ``PRAGMA data_version`` on SQLite, the write itself in
memory). So the fan-out lives here once, and a backend supplies a ``FeedSource`` that
calls ``committed``, ``work`` and ``head_seen``. A signal only says "look": streams read
the events from the store and wakeups lead to claims that check it, so a lost, repeated
or forged signal costs a read at most, never an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Protocol

from .backoff import Backoff
from .models import StoredEvent
from .wakeups import Wakeups

log = logging.getLogger("a2pg.feeds")

ReadAfter = Callable[[int], Awaitable[list[StoredEvent]]]
"""Reads the next stored events after an index (visible ones only, bounded)."""


class FeedSource(Protocol):
    """What learns of commits for a ``Feed``: started lazily, by the first subscriber."""

    def start(self) -> None:
        """Starts its task if it is not running (again, if it died)."""
        ...

    async def stop(self) -> None:
        """Stops its task and lets go of what it holds (a connection)."""
        ...


class Feed:
    """Fans signals out to a store's streams and wakeups; owns their bookkeeping.

    ``transient`` tells a read error a stream waits out (the database is away) from one
    it raises; ``scrub`` cleans the error before it is logged (a DSN's password).
    """

    def __init__(
        self,
        source: FeedSource | None = None,
        *,
        transient: Callable[[BaseException], bool] = lambda exc: False,
        scrub: Callable[[str], str] = str,
        retry: Backoff | None = None,
    ) -> None:
        self._source = source
        self._transient = transient
        self._scrub = scrub
        self._retry = retry or Backoff(base=0.1, cap=5.0)
        self._streams: dict[str, set[asyncio.Event]] = {}
        self._heads: dict[str, int] = {}
        """Each streamed session's head as a poll last read it: only a change is news."""
        self._wakeups: weakref.WeakSet[Wakeups] = weakref.WeakSet()
        self.closed = False

    # -- signals ---------------------------------------------------------------------------

    def committed(self, session_id: str) -> None:
        """New events may be readable in ``session_id``: its streams read again."""
        for signal in self._streams.get(session_id, ()):
            signal.set()

    def work(self, session_id: str | None) -> None:
        """Claimable work may have appeared (in ``session_id`` when known)."""
        for subscriber in list(self._wakeups):
            subscriber.push(session_id)

    def announce(self, appended: Sequence[str], work: Sequence[str]) -> None:
        """What a commit of this store did: its own subscribers hear it at once."""
        for session_id in appended:
            self.committed(session_id)
        for session_id in work:
            self.work(session_id)

    def head_seen(self, session_id: str, head: int) -> None:
        """A poll read ``session_id``'s head: its streams read again only if it moved.

        A session no longer streamed is ignored, so a poll that outlived the last stream
        of a session leaves nothing behind."""
        if session_id not in self._streams or self._heads.get(session_id) == head:
            return
        self._heads[session_id] = head
        self.committed(session_id)

    def streamed(self) -> list[str]:
        """Sessions with live streams, sorted: the heads a poll should read."""
        return sorted(self._streams)

    @property
    def wants_work(self) -> bool:
        """Whether anyone listens for work (else a poll need not look for it)."""
        return bool(self._wakeups)

    # -- subscriptions ---------------------------------------------------------------------

    async def stream(
        self, session_id: str, after: int, read_after: ReadAfter
    ) -> AsyncIterator[StoredEvent]:
        """Events after ``after`` as ``read_after`` reads them, in index order, then live
        ones as signals come, until the consumer or ``close()`` ends it."""
        signal = asyncio.Event()
        self._streams.setdefault(session_id, set()).add(signal)
        self.start()
        try:
            last = after
            failures = 0
            while not self.closed:
                signal.clear()
                try:
                    batch = await read_after(last)
                except Exception as exc:
                    if not self._transient(exc):
                        raise
                    failures += 1  # the database is away: wait for it, the stream lives on
                    delay = self._retry.delay(failures)
                    reason = self._scrub(str(exc))
                    log.warning("a2pg stream cannot read (%s); again in %.2fs", reason, delay)
                    await asyncio.sleep(delay)
                    continue
                failures = 0
                if not batch:
                    await signal.wait()
                    continue
                for event in batch:
                    yield event
                last = batch[-1].index
        finally:
            subscribers = self._streams.get(session_id)
            if subscribers is not None:
                subscribers.discard(signal)
                if not subscribers:
                    del self._streams[session_id]
                    self._heads.pop(session_id, None)

    def wakeups(self) -> Wakeups:
        """A new wakeups iterator, subscribed at once."""
        subscriber = Wakeups(self)
        self._wakeups.add(subscriber)
        with contextlib.suppress(RuntimeError):  # no running loop yet: starts on first use
            self.start()
        return subscriber

    def unsubscribe(self, subscriber: Wakeups) -> None:
        self._wakeups.discard(subscriber)

    # -- life ------------------------------------------------------------------------------

    def start(self) -> None:
        """Makes sure the source runs (it starts lazily and is restarted if it died)."""
        if not self.closed and self._source is not None:
            self._source.start()

    async def close(self) -> None:
        """Ends every stream and wakeups iterator at its next step, then stops the source."""
        self.closed = True
        for signals in self._streams.values():
            for signal in signals:
                signal.set()
        for subscriber in list(self._wakeups):
            subscriber.wake()
        if self._source is not None:
            await self._source.stop()
