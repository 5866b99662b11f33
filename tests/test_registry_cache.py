"""The registry cache every database backend reads the registry through."""

from __future__ import annotations

import asyncio

from a2pg import Consumer, LogSpec
from a2pg.contract.registry_cache import RegistryCache

OLD = [Consumer("audit", LogSpec())]
NEW = [*OLD, Consumer("billing", LogSpec())]


async def test_a_read_that_began_before_a_local_registration_does_not_cache_the_old_list() -> None:
    stored = list(OLD)
    reading = asyncio.Event()
    release = asyncio.Event()
    loads = 0

    async def load() -> list[Consumer]:
        nonlocal loads
        loads += 1
        found = list(stored)  # what the database held when the read ran
        reading.set()
        await release.wait()
        return found

    cache = RegistryCache(load, ttl=3600)
    slow = asyncio.create_task(cache.consumers())
    await asyncio.wait_for(reading.wait(), 10)
    cache.changed()  # a registration made here, committed while the read is in flight
    stored[:] = NEW
    cache.changed()
    release.set()
    assert await asyncio.wait_for(slow, 10) == OLD  # that caller asked before: fair
    assert await asyncio.wait_for(cache.consumers(), 10) == NEW  # the next one sees it
    assert loads == 2


async def test_reads_within_the_ttl_are_served_from_the_cache() -> None:
    loads = 0

    async def load() -> list[Consumer]:
        nonlocal loads
        loads += 1
        return OLD

    cache = RegistryCache(load, ttl=3600)
    assert [await cache.consumers() for _ in range(3)] == [OLD] * 3
    assert loads == 1
    cache.changed()
    assert await cache.consumers() == OLD
    assert loads == 2
