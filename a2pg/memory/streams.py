"""Live fan-out for MemoryStore: event streams and wakeups, fed by per-subscriber signals."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Callable

from ..models import StoredEvent

ReadAfter = Callable[[int], list[StoredEvent]]
"""Reads the next stored events after an index (visible ones only, bounded)."""


class Hub:
    """Signals subscribers when a session commits events or claimable work may appear.

    Streams read what they yield from the store itself, so a signal only says
    "look again": no event is carried twice or lost between signals.
    """

    def __init__(self) -> None:
        self.closed = False
        self._streams: dict[str, set[asyncio.Event]] = {}
        self._wakeups: weakref.WeakSet[Wakeups] = weakref.WeakSet()

    def committed(self, session_id: str) -> None:
        for signal in self._streams.get(session_id, ()):
            signal.set()

    def work(self, session_id: str) -> None:
        for subscriber in list(self._wakeups):
            subscriber.push(session_id)

    def close(self) -> None:
        """Ends every stream and wakeups iterator at its next step."""
        self.closed = True
        for signals in self._streams.values():
            for signal in signals:
                signal.set()
        for subscriber in list(self._wakeups):
            subscriber.wake()

    async def stream(
        self, session_id: str, after: int, read: ReadAfter
    ) -> AsyncIterator[StoredEvent]:
        """Stored events after ``after``, then live ones, until the store closes."""
        signal = asyncio.Event()
        subscribers = self._streams.setdefault(session_id, set())
        subscribers.add(signal)
        try:
            last = after
            while not self.closed:
                signal.clear()
                batch = read(last)
                if not batch:
                    await signal.wait()
                    continue
                for event in batch:
                    yield event
                last = batch[-1].index
        finally:
            subscribers.discard(signal)
            if not subscribers:
                self._streams.pop(session_id, None)

    def wakeups(self) -> Wakeups:
        subscriber = Wakeups(self)
        self._wakeups.add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Wakeups) -> None:
        self._wakeups.discard(subscriber)


class Wakeups:
    """Session ids where claimable work may have appeared, in first-signalled order, each
    pending id once. Subscribed from creation, so work signalled before the first
    ``__anext__`` is not missed; unsubscribed by ``aclose()`` (or when dropped)."""

    def __init__(self, hub: Hub) -> None:
        self._hub = hub
        self._pending: dict[str | None, None] = {}
        self._signal = asyncio.Event()
        self._closed = False

    def push(self, session_id: str | None) -> None:
        self._pending[session_id] = None
        self._signal.set()

    def wake(self) -> None:
        self._signal.set()

    def __aiter__(self) -> Wakeups:
        return self

    async def __anext__(self) -> str | None:
        while not (self._closed or self._hub.closed):
            if self._pending:
                session_id = next(iter(self._pending))
                del self._pending[session_id]
                return session_id
            self._signal.clear()
            await self._signal.wait()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._closed = True
        self._pending.clear()
        self._hub.unsubscribe(self)
        self._signal.set()
