"""Fixtures that run every conformance test once per backend, through the Store protocol only."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

from a2pg.ids import FakeClock, SequentialIds
from a2pg.store import Store

from .helpers import MakeStore

ALL_BACKENDS = ("memory", "postgres")
BACKENDS_ENV = "A2PG_TEST_BACKENDS"


def _selected_backends() -> list[str]:
    raw = os.environ.get(BACKENDS_ENV, ",".join(ALL_BACKENDS))
    names = [name.strip() for name in raw.split(",") if name.strip()]
    unknown = sorted(set(names) - set(ALL_BACKENDS))
    if unknown:
        raise pytest.UsageError(f"{BACKENDS_ENV} names unknown backends: {', '.join(unknown)}")
    return names


def _backend_params() -> list[object]:
    return [
        pytest.param(name, id=name, marks=[pytest.mark.postgres] if name == "postgres" else [])
        for name in _selected_backends()
    ]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ids() -> SequentialIds:
    return SequentialIds()


@pytest.fixture(params=_backend_params())
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def storage(backend: str, request: pytest.FixtureRequest) -> str | None:
    """The DSN of a fresh migrated database for postgres (from the a2pg.testing plugin)."""
    if backend == "postgres":
        dsn: str = request.getfixturevalue("postgres_dsn")
        return dsn
    return None


@pytest.fixture
async def make_store(
    backend: str, storage: str | None, clock: FakeClock, ids: SequentialIds
) -> AsyncIterator[MakeStore]:
    opened: list[Store] = []

    async def make() -> Store:
        if backend == "memory":
            if not opened:
                from a2pg.memory import MemoryStore

                opened.append(MemoryStore(clock=clock, ids=ids))
            return opened[0]
        from a2pg.postgres import PostgresStore

        assert storage is not None
        store: Store = await PostgresStore.open(storage, clock=clock, ids=ids)
        opened.append(store)
        return store

    yield make
    for store in reversed(opened):
        await store.close()


@pytest.fixture
async def store(make_store: MakeStore) -> Store:
    return await make_store()
