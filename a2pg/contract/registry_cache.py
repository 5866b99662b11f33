"""The consumer registry as a store process sees it: read through a short cache.

One rule for every backend that keeps the registry in a database: a registration made
by another process reaches this one's writes within ``ttl`` seconds, one made here at
once. "At once" needs care: a read that began before a local registration committed
may finish after it, and must not put the older list back in the cache.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from ..models import Consumer


class RegistryCache:
    """Registered log consumers, cached for ``ttl`` seconds. Every local change bumps a
    generation; a read stores what it found only if no change happened while it ran."""

    def __init__(self, load: Callable[[], Awaitable[list[Consumer]]], *, ttl: float) -> None:
        self._load = load
        self._ttl = ttl
        self._cached: tuple[float, list[Consumer]] | None = None
        self._generation = 0

    async def consumers(self) -> list[Consumer]:
        cached = self._cached
        now = time.monotonic()
        if cached is not None and now - cached[0] < self._ttl:
            return cached[1]
        generation = self._generation
        consumers = await self._load()
        if generation == self._generation:
            self._cached = (now, consumers)
        return consumers

    def changed(self) -> None:
        """Call before and after a local registration or unregistration is written."""
        self._generation += 1
        self._cached = None
