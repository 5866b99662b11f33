"""A Store wrapper whose ``wakeups()`` never fire, so a worker finds work by polling alone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from ..store import Store


class PollingOnly:
    """Everything of the wrapped store except notifications: ``a2pg worker --no-listen`` and
    the polling-only wake latency of ``a2pg bench`` (what a worker behind a
    transaction-mode pooler, where LISTEN never fires, would see)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def wakeups(self) -> AsyncIterator[str | None]:
        await asyncio.Event().wait()  # never set: wait until cancelled
        yield None  # pragma: no cover - unreachable; makes this an async generator
