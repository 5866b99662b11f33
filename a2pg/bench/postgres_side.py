"""``a2pg bench`` on PostgreSQL: the commit ceiling of raw psycopg connections
(``ceiling.py``), the ledger and the server's settings (``ledger.py``), ``--sync off``
(``sync.py``), and two history stores (``history.py``) for the history phase."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Sequence
from typing import Any, TextIO

from ..backends import Site
from ..postgres.backend import PostgresSite
from . import ceiling
from .config import APPEND_TASKS, BenchConfig
from .history import forget, load, schema_name
from .ledger import Ledger, SchemaLedger, load_average
from .side import History, Shape
from .sync import Sync, synchronous_commit

SHAPE = Shape(
    ceiling=lambda n: f"commit ceiling, N={n}",
    writers=lambda processes, connections: processes * connections,
    wake=("notify", "NOTIFY"),
    memory=True,
    history=True,
    targets=True,
)


def _postgres(site: Site) -> PostgresSite:
    if not isinstance(site, PostgresSite):
        raise TypeError(f"a PostgreSQL bench needs a PostgreSQL site, got {site!r}")
    return site


class PostgresSide:
    """The bench's ledger connection, scratch ceiling table and history schemas."""

    shape = SHAPE

    def __init__(self, site: Site, c: BenchConfig, sync: Sync) -> None:
        self.site = _postgres(site)
        self.dsn = self.site.given_dsn
        self.base = self.site.schema_name
        self.c = c
        self.sync = sync
        self.table = ceiling.scratch_name()
        self.server = "PostgreSQL"
        self._ledger: Ledger | None = None
        self._histories: list[History] = []

    @property
    def histories(self) -> Sequence[History]:
        return self._histories

    @property
    def running_ledger(self) -> Ledger:
        if self._ledger is None:
            raise RuntimeError("the PostgreSQL bench side is not running")
        return self._ledger

    @contextlib.asynccontextmanager
    async def running(self, log: TextIO) -> AsyncIterator[dict[str, Any]]:
        """``--sync off`` first (it reaches only connections opened after it), then the
        migrations, the ledger, the scratch table and the loaded histories."""
        async with synchronous_commit(self.dsn, self.sync):
            await self.site.migrate()
            ledger = self._ledger = await Ledger.connect(self.dsn)
            try:
                machine = await ledger.machine()
                machine["load_average_start"] = load_average()
                self.server = f"PostgreSQL {machine['postgres']}"
                machine["server"] = (
                    f"{self.server}, fsync {machine['fsync']}, "
                    f"synchronous_commit {machine['synchronous_commit']}"
                )
                await ceiling.create_table(ledger.conn, self.base, self.table)
                await self._load(log)
                yield machine
            finally:
                await ceiling.drop_table(ledger.conn, self.base, self.table)
                for history in self._histories:
                    await ledger.drop_schema(_postgres(history.site).schema_name)
                await ledger.close()

    async def _load(self, log: TextIO) -> None:
        for key, size in (("history_base", self.c.history_base), ("history_full", self.c.history)):
            name = schema_name(self.base, size)
            site = dataclasses.replace(self.site, schema=name)
            self._histories.append(History(key, size, site))
            log.write(f"loading {size:,} completed events into schema {name}...")
            log.flush()
            await site.migrate()
            await load(self.running_ledger, name, size, log)
            log.write(" done\n")

    async def ceiling(self, n: int, seconds: float) -> float:
        return await ceiling.measure(
            self.running_ledger.conn, self.dsn, self.base, self.table, n, seconds
        )

    def ledger(self, site: Site) -> SchemaLedger:
        return self.running_ledger.of(_postgres(site).schema_name)

    async def forget(self, history: History, ids: Sequence[str]) -> None:
        await forget(self.running_ledger, _postgres(history.site).schema_name, ids)

    def ceiling_report(self) -> dict[str, str]:
        return {
            "shape": ceiling.SHAPE,
            "how": "N raw psycopg connections, not autocommit, one thread each, "
            "in min(N, CPU cores) processes, for ceiling_seconds",
            "n": f"the phase's connection count: P worker processes x pool_size "
            f"{self.c.pool_size} for drains, {APPEND_TASKS} tasks for appends",
        }
