"""The ``wakeups()`` iterator every backend hands out: pending session ids, each once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable


@runtime_checkable
class Subscription(Protocol):
    """What ``Store.wakeups()`` returns: an async iterator of session ids (None: unknown)
    that ``aclose()`` unsubscribes at once. Subscribed from creation."""

    def __aiter__(self) -> AsyncIterator[str | None]: ...

    async def __anext__(self) -> str | None: ...

    async def aclose(self) -> None: ...


class WakeupSource(Protocol):
    """What feeds a ``Wakeups``: a store's ``Feed`` (``a2pg.feeds``)."""

    @property
    def closed(self) -> bool: ...

    def start(self) -> None:
        """Makes sure signals flow (a source starts lazily); called on each wait."""
        ...

    def unsubscribe(self, subscriber: Wakeups) -> None: ...


class Wakeups:
    """Session ids where claimable work may have appeared (None: unknown), each pending id
    once, in first-signalled order. Subscribed from creation, so work signalled before
    the first ``__anext__`` is not missed; ``aclose()`` unsubscribes. Ends when the
    source closes."""

    def __init__(self, source: WakeupSource) -> None:
        self._source = source
        self._pending: dict[str | None, None] = {}
        self._signal = asyncio.Event()
        self._closed = False

    def push(self, session_id: str | None) -> None:
        self._pending[session_id] = None
        self._signal.set()

    def wake(self) -> None:
        """Lets a waiting ``__anext__`` look again (the source closing, for one)."""
        self._signal.set()

    def __aiter__(self) -> Wakeups:
        return self

    async def __anext__(self) -> str | None:
        self._source.start()
        while not (self._closed or self._source.closed):
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
        self._source.unsubscribe(self)
        self._signal.set()
