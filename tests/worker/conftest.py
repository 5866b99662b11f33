"""Worker test fixtures: MemoryStore by default, PostgreSQL too when A2PG_TEST_BACKENDS names it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from a2pg.ids import FakeClock, SequentialIds
from a2pg.store import Store

BACKENDS_ENV = "A2PG_TEST_BACKENDS"

MakeStore = Callable[[], Awaitable[Store]]
"""Opens another client of the same storage (the same instance for memory)."""


def _backend_params() -> list[object]:
    params: list[object] = [pytest.param("memory", id="memory")]
    if "postgres" in os.environ.get(BACKENDS_ENV, ""):
        params.append(pytest.param("postgres", id="postgres", marks=[pytest.mark.postgres]))
    return params


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ids() -> SequentialIds:
    return SequentialIds("ev")


@pytest.fixture(params=_backend_params())
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
async def make_store(
    backend: str, request: pytest.FixtureRequest, clock: FakeClock, ids: SequentialIds
) -> AsyncIterator[MakeStore]:
    opened: list[Store] = []
    dsn: str | None = None
    if backend == "postgres":
        try:
            dsn = request.getfixturevalue("postgres_dsn")
        except pytest.FixtureLookupError:
            pytest.skip("no postgres_dsn fixture: the a2pg.testing plugin does not provide it yet")

    async def make() -> Store:
        if backend == "memory":
            if not opened:
                from a2pg.memory import MemoryStore

                opened.append(MemoryStore(clock=clock, ids=ids))
            return opened[0]
        from a2pg.postgres import PostgresStore

        assert dsn is not None
        store = await PostgresStore.open(dsn, clock=clock, ids=ids)
        opened.append(store)
        return store

    yield make
    for store in reversed(opened):
        await store.close()


@pytest.fixture
async def store(make_store: MakeStore) -> Store:
    """The backend under test; parametrized (memory, and postgres when selected)."""
    return await make_store()


@pytest.fixture
async def memory(clock: FakeClock, ids: SequentialIds) -> AsyncIterator[Store]:
    """A MemoryStore for tests of worker logic that need no second backend."""
    from a2pg.memory import MemoryStore

    store = MemoryStore(clock=clock, ids=ids)
    yield store
    await store.close()
