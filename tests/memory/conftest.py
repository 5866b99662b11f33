"""Fixtures for MemoryStore's own tests: a store on a fake clock with predictable ids."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from a2pg.ids import FakeClock, SequentialIds
from a2pg.memory import MemoryStore


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ids() -> SequentialIds:
    return SequentialIds()


@pytest.fixture
async def store(clock: FakeClock, ids: SequentialIds) -> AsyncIterator[MemoryStore]:
    memory = MemoryStore(clock=clock, ids=ids)
    yield memory
    await memory.close()
