"""The two stores under comparison, on one clock, and how each example starts them clean.

One ``PostgresStore`` serves a whole test run (opening a pool per example would cost
more than the example); between examples its tables are emptied through a connection
of its own, as ``a2pg.testing.ReusableDatabase`` does between tests. The MemoryStore is
simply made anew.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import psycopg
from psycopg import sql

from a2pg import A2Error
from a2pg.ids import FakeClock, SequentialIds
from a2pg.memory import MemoryStore
from a2pg.postgres import PostgresStore
from a2pg.postgres.layout import TABLES
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


class Pair:
    """A MemoryStore and a PostgresStore on one FakeClock, driven from synchronous code."""

    def __init__(self, runner: asyncio.Runner, dsn: str) -> None:
        self._runner = runner
        self.clock = FakeClock(START)
        self._memory_ids = StepIds()
        self._postgres_ids = StepIds()
        self._step = 0
        self.memory = MemoryStore(clock=self.clock, ids=self._memory_ids)
        # registry_ttl=0: every write reads the registry, which the reset empties behind
        # the store's back; the store's own (un)registrations drop its cache anyway.
        self.postgres = self.run(
            PostgresStore.open(
                dsn, clock=self.clock, ids=self._postgres_ids, registry_ttl=0.0, max_size=8
            )
        )
        self._admin: psycopg.AsyncConnection[Any] = self.run(
            psycopg.AsyncConnection.connect(dsn, autocommit=True)
        )
        self._empty = sql.SQL("; ").join(
            sql.SQL("delete from {}").format(sql.Identifier(name))
            for name in TABLES
            if name not in KEPT_TABLES
        )

    @property
    def stores(self) -> tuple[Store, Store]:
        return (self.memory, self.postgres)

    def run(self, call: Awaitable[T]) -> T:
        return self._runner.run(_awaited(call))

    def reset(self) -> None:
        """A fresh example: empty tables, a new MemoryStore, the clock back at the start."""
        self.run(self._empty_tables())
        self.memory = MemoryStore(clock=self.clock, ids=self._memory_ids)
        self.clock.set(START)
        self._step = 0

    async def _empty_tables(self) -> None:
        async with self._admin.transaction():
            await self._admin.execute(self._empty)

    def both(self, call: Callable[[Store], Awaitable[T]]) -> tuple[Outcome[T], Outcome[T]]:
        """Runs one step's call on memory, then on PostgreSQL, with the same generated ids."""
        self._step += 1
        self._memory_ids.restart(self._step)
        self._postgres_ids.restart(self._step)
        return (self.run(outcome(call(self.memory))), self.run(outcome(call(self.postgres))))

    def close(self) -> None:
        self.run(self.postgres.close())
        self.run(self._admin.close())


async def _awaited(call: Awaitable[T]) -> T:
    return await call
