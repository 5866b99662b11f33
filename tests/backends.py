"""Store fixtures for every suite that runs on each backend: one table says how to open each.

Loaded by ``tests/conftest.py`` (``pytest_plugins``). ``store`` and ``make_store`` are
parametrized over the backends ``A2PG_TEST_BACKENDS`` names (comma-separated; default:
all of :data:`BACKENDS`). Adding a backend is one :class:`Backend` entry: where a test's
data lives (made once per test) and how to open one more client on it. A file-backed
store, for instance, would take ``tmp_path / "a2.db"`` as its storage.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from a2pg.contract import DEFAULT_LIMITS, Limits
from a2pg.ids import FakeClock, SequentialIds
from a2pg.store import Store

if TYPE_CHECKING:
    from a2pg.memory import MemoryStore

BACKENDS_ENV = "A2PG_TEST_BACKENDS"

MakeStore = Callable[[], Awaitable[Store]]
"""Opens another client of the test's storage (the same instance for memory)."""


@dataclass(frozen=True)
class Backend:
    """How the shared suites reach one Store implementation."""

    name: str
    storage: Callable[[pytest.FixtureRequest], Any]
    """Where this test's data lives (a DSN, a file path), made once per test."""
    open: Callable[[Any, FakeClock, SequentialIds, Limits], Awaitable[Store]]
    """One more client on ``storage``, on the test's clock, ids and limits."""
    one_instance: bool = False
    """Every ``make_store()`` returns the first client: the store is its own storage."""
    marks: tuple[pytest.MarkDecorator, ...] = ()


def _no_storage(request: pytest.FixtureRequest) -> None:
    return None


async def _open_memory(
    storage: None, clock: FakeClock, ids: SequentialIds, limits: Limits
) -> Store:
    from a2pg.memory import MemoryStore

    return MemoryStore(clock=clock, ids=ids, limits=limits)


def _postgres_database(request: pytest.FixtureRequest) -> str:
    """A clean migrated database, from the a2pg.testing plugin."""
    dsn: str = request.getfixturevalue("postgres_dsn")
    return dsn


async def _open_postgres(dsn: str, clock: FakeClock, ids: SequentialIds, limits: Limits) -> Store:
    from a2pg.postgres import PostgresStore

    return await PostgresStore.open(dsn, clock=clock, ids=ids, limits=limits)


BACKENDS = (
    Backend("memory", _no_storage, _open_memory, one_instance=True),
    Backend("postgres", _postgres_database, _open_postgres, marks=(pytest.mark.postgres,)),
)
_BY_NAME = {backend.name: backend for backend in BACKENDS}


def selected_backends() -> list[Backend]:
    """The backends ``A2PG_TEST_BACKENDS`` names, in its order; unknown names stop the run."""
    raw = os.environ.get(BACKENDS_ENV, ",".join(_BY_NAME))
    names = [name.strip() for name in raw.split(",") if name.strip()]
    unknown = sorted(set(names) - set(_BY_NAME))
    if unknown:
        known = ", ".join(_BY_NAME)
        raise pytest.UsageError(
            f"{BACKENDS_ENV} names unknown backends: {', '.join(unknown)} (known: {known})"
        )
    return [_BY_NAME[name] for name in names]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ids() -> SequentialIds:
    return SequentialIds()


@pytest.fixture
def limits() -> Limits:
    """The stores' limits; a module overrides this fixture to test other settings."""
    return DEFAULT_LIMITS


@pytest.fixture(params=[pytest.param(b, id=b.name, marks=b.marks) for b in selected_backends()])
def backend(request: pytest.FixtureRequest) -> Backend:
    chosen: Backend = request.param
    return chosen


@pytest.fixture
async def make_store(
    backend: Backend,
    request: pytest.FixtureRequest,
    clock: FakeClock,
    ids: SequentialIds,
    limits: Limits,
) -> AsyncIterator[MakeStore]:
    """Opens clients of one storage for this test; closes them all afterwards."""
    storage = backend.storage(request)
    opened: list[Store] = []

    async def make() -> Store:
        if backend.one_instance and opened:
            return opened[0]
        store = await backend.open(storage, clock, ids, limits)
        opened.append(store)
        return store

    yield make
    for store in reversed(opened):
        await store.close()


@pytest.fixture
async def store(make_store: MakeStore) -> Store:
    """The backend under test, through the Store protocol only."""
    return await make_store()


@pytest.fixture
async def memory(clock: FakeClock, ids: SequentialIds) -> AsyncIterator[MemoryStore]:
    """A MemoryStore alone, for tests whose point needs no second backend."""
    from a2pg.memory import MemoryStore

    opened = MemoryStore(clock=clock, ids=ids)
    yield opened
    await opened.close()
