"""The two stores under comparison, on one clock, and how each example starts them clean.

The MemoryStore (the reference) is compared with one ``Candidate``: a PostgresStore or
a SqliteStore. One candidate store serves a whole test run (opening one per example
would cost more than the example); between examples its tables are emptied through a
connection of its own, as ``a2pg.testing.ReusableDatabase`` does between tests. The
MemoryStore is simply made anew.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import psycopg
from psycopg import sql

from a2pg import A2Error
from a2pg.ids import FakeClock, IdGenerator, SequentialIds
from a2pg.memory import MemoryStore
from a2pg.store import Store

from .universe import START

T = TypeVar("T")

KEPT_TABLES = frozenset({"a2_meta"})
"""Tables that hold the layout, not data: never emptied."""


class StepIds:
    """Generated ids that restart with a new prefix at every step.

    Each store has its own; both restart together, so a step's generated ids coincide
    on both backends even if an earlier, failed step drew ids on one and not the other
    (with UUIDv7 in production, how many ids a failed call drew is not observable).
    """

    def __init__(self) -> None:
        self._ids = SequentialIds()

    def restart(self, step: int) -> None:
        self._ids = SequentialIds(prefix=f"g{step}")

    def __call__(self) -> str:
        return self._ids()


@dataclass(frozen=True, slots=True)
class Ok(Generic[T]):
    """A call's result."""

    value: T


@dataclass(frozen=True, slots=True)
class Failed:
    """A call's ``A2Error``: only the code is compared (messages may word it differently)."""

    code: str


Outcome = Ok[T] | Failed


async def outcome(call: Awaitable[T]) -> Outcome[T]:
    """The result of ``call``, or the code of the ``A2Error`` it raised (others propagate)."""
    try:
        return Ok(await call)
    except A2Error as error:
        return Failed(error.code)


class Candidate(Protocol):
    """The backend compared with memory: how to open its store and empty its tables."""

    name: str

    async def open(self, clock: FakeClock, ids: IdGenerator) -> Store: ...

    async def empty(self) -> None: ...

    async def close(self) -> None: ...


class PostgresCandidate:
    """A PostgresStore on a migrated database, emptied through a connection of its own."""

    name = "postgres"

    def __init__(self, dsn: str) -> None:
        from a2pg.postgres.layout import TABLES

        self._dsn = dsn
        self._admin: psycopg.AsyncConnection[Any] | None = None
        self._empty = sql.SQL("; ").join(
            sql.SQL("delete from {}").format(sql.Identifier(name))
            for name in TABLES
            if name not in KEPT_TABLES
        )

    async def open(self, clock: FakeClock, ids: IdGenerator) -> Store:
        from a2pg.postgres import PostgresStore

        self._admin = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
        # registry_ttl=0: every write reads the registry, which the reset empties behind
        # the store's back; the store's own (un)registrations drop its cache anyway.
        store: Store = await PostgresStore.open(
            self._dsn, clock=clock, ids=ids, registry_ttl=0.0, max_size=8
        )
        return store

    async def empty(self) -> None:
        assert self._admin is not None
        async with self._admin.transaction():
            await self._admin.execute(self._empty)

    async def close(self) -> None:
        if self._admin is not None:
            await self._admin.close()


class SqliteCandidate:
    """A SqliteStore on a migrated file, emptied through a connection of its own."""

    name = "sqlite"

    def __init__(self, path: Path) -> None:
        from a2pg.sqlite import upgrade

        upgrade(path)
        self._path = path

    async def open(self, clock: FakeClock, ids: IdGenerator) -> Store:
        from a2pg.sqlite import SqliteStore

        store: Store = await SqliteStore.open(self._path, clock=clock, ids=ids, registry_ttl=0.0)
        return store

    async def empty(self) -> None:
        from a2pg.sqlite.layout import TABLES

        conn = sqlite3.connect(self._path, isolation_level=None)
        try:
            conn.execute("begin immediate")
            for name in TABLES:
                if name not in KEPT_TABLES:
                    conn.execute(f"delete from {name}")  # names from a2pg's own list
            conn.execute("commit")
        finally:
            conn.close()

    async def close(self) -> None:
        """Nothing of its own to close: the store closes with the pair."""


class Pair:
    """A MemoryStore and a candidate store on one FakeClock, driven from synchronous code."""

    def __init__(self, runner: asyncio.Runner, candidate: Candidate) -> None:
        self._runner = runner
        self.candidate = candidate
        self.name = candidate.name
        self.clock = FakeClock(START)
        self._memory_ids = StepIds()
        self._other_ids = StepIds()
        self._step = 0
        self.memory = MemoryStore(clock=self.clock, ids=self._memory_ids)
        self.other = self.run(candidate.open(self.clock, self._other_ids))

    @property
    def stores(self) -> tuple[Store, Store]:
        return (self.memory, self.other)

    def run(self, call: Awaitable[T]) -> T:
        return self._runner.run(_awaited(call))

    def reset(self) -> None:
        """A fresh example: empty tables, a new MemoryStore, the clock back at the start."""
        self.run(self.candidate.empty())
        self.memory = MemoryStore(clock=self.clock, ids=self._memory_ids)
        self.clock.set(START)
        self._step = 0

    def both(self, call: Callable[[Store], Awaitable[T]]) -> tuple[Outcome[T], Outcome[T]]:
        """Runs one step's call on memory, then on the candidate, with the same generated ids."""
        self._step += 1
        self._memory_ids.restart(self._step)
        self._other_ids.restart(self._step)
        return (self.run(outcome(call(self.memory))), self.run(outcome(call(self.other))))

    def close(self) -> None:
        self.run(self.other.close())
        self.run(self.candidate.close())


async def _awaited(call: Awaitable[T]) -> T:
    return await call
