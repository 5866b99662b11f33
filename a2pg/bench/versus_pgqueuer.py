"""The pgqueuer side of ``a2pg bench --versus``: one job of entrypoint ``vs_job`` is one job.

pgqueuer (asyncpg) is driven as its users drive it: ``Queries`` built on query builders
bound to ``DBSettings(db_schema=...)`` (a schema of its own, and a NOTIFY channel of
that schema's own, since channels are database-wide), ``Queries.install`` there,
``Queries.enqueue`` with lists (one statement per call), and ``QueueManager.run``
with the same entrypoint handler on every manager, batch size ``CONCURRENCY`` and the
smallest in-flight cap pgqueuer accepts for it (twice the batch). Each QueueManager
gets an asyncpg pool of its own (``AsyncpgPoolDriver``: its LISTEN connection plus
query connections), the producers another. A job is done once pgqueuer moved it from
its queue table to its log as ``successful``; that is what ``left`` and ``done`` read.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import asyncpg
from pgqueuer import AsyncpgDriver, AsyncpgPoolDriver, QueueManager
from pgqueuer.adapters.persistence.qb import (
    QueryBuilderEnvironment,
    QueryQueueBuilder,
    QuerySchedulerBuilder,
)
from pgqueuer.domain.settings import DBSettings
from pgqueuer.domain.types import Channel
from pgqueuer.ports.driver import Driver
from pgqueuer.queries import Queries
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from ..postgres.dsn import to_libpq
from .ledger import Ledger
from .versus_config import CONCURRENCY, PRODUCER_POOL, WORKER_POOL, WORKERS
from .versus_phases import Tally, first_failure

if TYPE_CHECKING:
    from pgqueuer.models import Job

ENTRYPOINT = "vs_job"
BATCH_SIZE = CONCURRENCY
MAX_IN_FLIGHT = 2 * BATCH_SIZE
"""pgqueuer refuses ``max_concurrent_tasks`` below twice the batch size."""
QM_POOL = WORKER_POOL // WORKERS
FILL_CALL = 1_000
"""Jobs per enqueue call filling a backlog (untimed)."""
FILL_TASKS = 4
DEQUEUE_TIMEOUT = timedelta(seconds=30)
"""pgqueuer's default: an idle QueueManager waits this long for a NOTIFY before polling."""


def connect_options(dsn: str) -> dict[str, Any]:
    """asyncpg's keywords for a libpq DSN (URL or key=value): where, who, which database."""
    found = conninfo_to_dict(to_libpq(dsn))
    options: dict[str, Any] = {
        name: found[name] for name in ("host", "port", "user", "password") if found.get(name)
    }
    if found.get("dbname"):
        options["database"] = found["dbname"]
    if found.get("sslmode"):
        options["ssl"] = found["sslmode"]
    options["server_settings"] = {"application_name": "a2pg-bench-vs-pgqueuer"}
    return options


def settings_for(schema: str) -> DBSettings:
    return DBSettings(db_schema=schema, channel=Channel(f"{schema}_ch"))


def queries(driver: Driver, settings: DBSettings) -> Queries:
    return Queries(
        driver,
        qbe=QueryBuilderEnvironment(settings),
        qbq=QueryQueueBuilder(settings),
        qbs=QuerySchedulerBuilder(settings),
    )


async def install(dsn: str, schema: str) -> str:
    """pgqueuer's tables, types, trigger and function in ``schema`` (created by it); returns
    the ``synchronous_commit`` its asyncpg connection ran with."""
    conn = await asyncpg.connect(**connect_options(dsn))
    try:
        await queries(AsyncpgDriver(conn), settings_for(schema)).install()
        return str(await conn.fetchval("show synchronous_commit"))
    finally:
        await conn.close()


def version() -> str:
    try:
        return importlib.metadata.version("pgqueuer")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class PgqWorkers:
    """QueueManager tasks, one asyncpg pool each, launched together."""

    def __init__(self, managers: list[QueueManager]) -> None:
        self.managers = managers
        self.tasks = [
            asyncio.create_task(
                qm.run(
                    dequeue_timeout=DEQUEUE_TIMEOUT,
                    batch_size=BATCH_SIZE,
                    max_concurrent_tasks=MAX_IN_FLIGHT,
                ),
                name=f"a2pg-bench-vs-pgqueuer-{i}",
            )
            for i, qm in enumerate(managers)
        ]

    def failure(self) -> BaseException | None:
        return first_failure(self.tasks)

    async def stop(self) -> None:
        for qm in self.managers:
            qm.shutdown.set()
        await asyncio.gather(*self.tasks)


class PgqueuerSide:
    """pgqueuer in its own (installed) schema; ``open`` before use, ``close`` after."""

    name = "pgqueuer"

    def __init__(self, dsn: str, schema: str, ledger: Ledger) -> None:
        self.dsn = dsn
        self.schema = schema
        self.ledger = ledger
        self.settings = settings_for(schema)
        self.pools: list[Any] = []
        self.producer: Queries | None = None

    async def open(self) -> None:
        options = connect_options(self.dsn)
        producers = await asyncpg.create_pool(
            min_size=PRODUCER_POOL, max_size=PRODUCER_POOL, **options
        )
        self.pools.append(producers)
        self.producer = queries(AsyncpgPoolDriver(producers), self.settings)
        for _ in range(WORKERS):
            self.pools.append(
                await asyncpg.create_pool(min_size=QM_POOL, max_size=QM_POOL, **options)
            )

    async def close(self) -> None:
        for pool in self.pools:
            with contextlib.suppress(Exception):
                await pool.close()
        self.pools = []
        self.producer = None

    def _producer(self) -> Queries:
        if self.producer is None:
            raise RuntimeError("the pgqueuer side is not open")
        return self.producer

    def phase(self, label: str) -> None:
        """One queue for every phase: nothing to switch."""

    async def enqueue(self, first: int, count: int) -> None:
        numbers = range(first, first + count)
        await self._producer().enqueue(
            [ENTRYPOINT] * count, [str(n).encode() for n in numbers], [0] * count
        )

    async def fill(self, count: int) -> None:
        gate = asyncio.Semaphore(FILL_TASKS)

        async def one(first: int) -> None:
            async with gate:
                await self.enqueue(first, min(FILL_CALL, count - first))

        await asyncio.gather(*(one(first) for first in range(0, count, FILL_CALL)))

    async def start_workers(self, count: int, tally: Tally) -> PgqWorkers:
        managers: list[QueueManager] = []
        for pool in self.pools[1 : 1 + count]:
            qm = QueueManager(
                queries(AsyncpgPoolDriver(pool), self.settings), channel=self.settings.channel
            )

            async def handle(job: Job) -> None:
                """Does nothing but report: the bench measures the queue, not a handler."""
                tally.record(int(job.payload or b"-1"))

            qm.entrypoint(ENTRYPOINT, accepts_context=False)(handle)
            managers.append(qm)
        return PgqWorkers(managers)

    def _table(self, name: str) -> sql.Identifier:
        return sql.Identifier(self.schema, name)

    async def _count(self, query: sql.Composed) -> tuple[int, ...]:
        cur = await self.ledger.conn.execute(query)
        row = await cur.fetchone()
        return tuple(int(value) for value in row) if row else (0, 0)

    async def left(self) -> int:
        """Jobs still in the queue table (queued or picked): done ones leave it."""
        table = self._table(self.settings.queue_table)
        return (await self._count(sql.SQL("select count(*) from {}").format(table)))[0]

    async def done(self) -> tuple[int, int]:
        table = self._table(self.settings.queue_table_log)
        query = sql.SQL(
            "select count(*), count(distinct job_id) from {} where status = 'successful'"
        ).format(table)
        done, distinct = await self._count(query)
        return done, distinct

    async def clean(self) -> None:
        names = (
            self.settings.queue_table,
            self.settings.queue_table_log,
            self.settings.statistics_table,
        )
        tables = sql.SQL(", ").join(self._table(name) for name in names)
        await self.ledger.conn.execute(sql.SQL("truncate {}").format(tables))
