"""The a2pg side of ``a2pg bench --versus``: one targeted event is one job.

Job ``n`` is ``NewEvent("bench.job", {"n": n}, targets=[Target("vs_job")])`` on one of
``SESSIONS`` sessions. Producers append through a store of ``PRODUCER_POOL``
connections; the workers (``a2pg.worker.Worker`` tasks in this process) share one
store of ``WORKER_POOL``, so the producers never wait on the workers' connections.
What is left and done is read from the a2_ tables (``ledger.Ledger``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

from psycopg import sql

from ..models import Head, NewEvent, Target
from ..postgres import PostgresStore
from ..postgres.backend import env_pooler, env_prepare
from ..postgres.layout import TABLES
from ..worker import App, Worker
from .ledger import Ledger
from .versus_config import CONCURRENCY, PRODUCER_POOL, SESSIONS, WORKER_POOL
from .versus_phases import Tally, first_failure

CONSUMER = "vs_job"
JOB_TYPE = "bench.job"
TARGETS = (Target(CONSUMER),)
FILL_TASKS = 4
EMPTIED = tuple(name for name in TABLES if name != "a2_meta")
"""What ``clean`` truncates: everything but the layout's own record."""


async def _open(dsn: str, schema: str, size: int) -> PostgresStore:
    store: PostgresStore = await PostgresStore.open(
        dsn,
        schema=schema,
        min_size=size,
        max_size=size,
        prepare=env_prepare(os.environ),
        pooler=env_pooler(os.environ) or "none",
    )
    return store


class A2pgWorkers:
    """``Worker`` tasks sharing one store, launched together."""

    def __init__(self, workers: list[Worker]) -> None:
        self.workers = workers
        self.tasks = [
            asyncio.create_task(w.run(), name=f"a2pg-bench-vs-worker-{i}")
            for i, w in enumerate(workers)
        ]

    def failure(self) -> BaseException | None:
        return first_failure(self.tasks)

    async def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        await asyncio.gather(*self.tasks)


class A2pgSide:
    """a2pg in its own (migrated) schema; ``open`` before use, ``close`` after."""

    name = "a2pg"

    def __init__(self, dsn: str, schema: str, ledger: Ledger) -> None:
        self.dsn = dsn
        self.schema = schema
        self.ledger = ledger
        self.producer: PostgresStore | None = None
        self.served: PostgresStore | None = None
        self.prefix = "vs"

    async def open(self) -> None:
        self.producer = await _open(self.dsn, self.schema, PRODUCER_POOL)
        self.served = await _open(self.dsn, self.schema, WORKER_POOL)

    async def close(self) -> None:
        for store in (self.producer, self.served):
            if store is not None:
                with contextlib.suppress(Exception):
                    await store.close()
        self.producer = self.served = None

    def _store(self, store: PostgresStore | None) -> PostgresStore:
        if store is None:
            raise RuntimeError("the a2pg side is not open")
        return store

    def phase(self, label: str) -> None:
        self.prefix = "vs-" + label.replace(" ", "-")

    @property
    def sessions(self) -> list[str]:
        return [f"{self.prefix}-{i}" for i in range(SESSIONS)]

    async def enqueue(self, first: int, count: int) -> None:
        """One append of ``count`` events to one session (job ``first`` picks it)."""
        events = [
            NewEvent(JOB_TYPE, {"n": n}, targets=TARGETS) for n in range(first, first + count)
        ]
        session = f"{self.prefix}-{(first // count) % SESSIONS}"
        await self._store(self.producer).append(session, events)

    async def fill(self, count: int) -> None:
        """Job ``n`` in session ``n % SESSIONS``: one append per session, 4 at a time."""
        gate = asyncio.Semaphore(FILL_TASKS)
        store = self._store(self.producer)

        async def one(index: int) -> None:
            events = [
                NewEvent(JOB_TYPE, {"n": n}, targets=TARGETS) for n in range(index, count, SESSIONS)
            ]
            if events:
                async with gate:
                    await store.append(f"{self.prefix}-{index}", events)

        await asyncio.gather(*(one(i) for i in range(SESSIONS)))

    async def start_workers(self, count: int, tally: Tally) -> A2pgWorkers:
        app = App()

        @app.consumer(CONSUMER)
        async def handle(head: Head) -> None:
            """Does nothing but report: the bench measures the queue, not a handler."""
            payload: Any = head.event.payload
            tally.record(int(payload["n"]))

        store = self._store(self.served)
        return A2pgWorkers([Worker(store, app, concurrency=CONCURRENCY) for _ in range(count)])

    async def left(self) -> int:
        return await self.ledger.live_heads(self.schema, self.sessions)

    async def done(self) -> tuple[int, int]:
        """Event cursors completed: one per job, so done and distinct are the same count."""
        done, _ = await self.ledger.done(self.schema, self.sessions, CONSUMER)
        return done, done

    async def clean(self) -> None:
        tables = sql.SQL(", ").join(sql.Identifier(self.schema, name) for name in EMPTIED)
        await self.ledger.conn.execute(sql.SQL("truncate {}").format(tables))
