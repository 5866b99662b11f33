"""Live fan-out for MemoryStore: event streams and wakeups, fed by per-subscriber signals."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Callable

from ..models import StoredEvent
from ..wakeups import Wakeups

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

    def start(self) -> None:
        """Nothing to start: memory signals subscribers as it writes."""
