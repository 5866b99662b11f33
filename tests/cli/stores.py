"""Set-up and checks that talk to the test database directly, beside the command under test."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from a2pg.postgres import PostgresStore

T = TypeVar("T")


def with_store(dsn: str, work: Callable[[PostgresStore], Awaitable[T]]) -> T:
    """``work(store)`` on a store of ``dsn`` opened for it and closed after."""

    async def run() -> T:
        store = await PostgresStore.open(dsn)
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(run())


def wait_for(predicate: Callable[[], bool], *, within: float = 20.0, every: float = 0.05) -> None:
    """Checks ``predicate`` until it holds; fails the test after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, f"not within {within}s: {predicate.__doc__ or ''}"
        time.sleep(every)
