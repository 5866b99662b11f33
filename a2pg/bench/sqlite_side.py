"""``a2pg bench --sqlite``: SqliteStore's figures beside the file system's write ceiling.

The ceiling (``sqlite_ceiling.py``) is measured in each run on a scratch file in the
database's folder: drains against the ceiling of P writer processes, appends (one
process, one writer connection) against that of one. Wake latency with the store's
change signal (``PRAGMA data_version`` every 15 ms) and with polling only. The
PostgreSQL targets do not apply here; the history and memory phases and ``pool_size``
are PostgreSQL's (not run), as is ``--sync off``.
"""

from __future__ import annotations

import contextlib
import os
import platform
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from ..backends import Site
from ..sqlite.backend import SqliteSite
from ..sqlite.probe import SqliteProbe, version
from ..sqlite.streams import CHANGE_INTERVAL
from . import sqlite_ceiling
from .config import BenchConfig
from .ledger import load_average
from .side import History, Shape
from .sync import Sync

SHAPE = Shape(
    ceiling=lambda n: f"write ceiling, {n} writer processes",
    writers=lambda processes, connections: processes,
    wake=("change", f"change signal every {CHANGE_INTERVAL * 1000:g} ms"),
    memory=False,
    history=False,
    targets=False,
    no_sync="--sync off applies to PostgreSQL, not to --sqlite",
)

SYNCHRONOUS = "normal"
"""The store's synchronous level (``SqliteStore.open``'s default)."""


def machine() -> dict[str, Any]:
    return {
        "cpu_cores": os.cpu_count(),
        "sqlite": version(),
        "journal_mode": "wal",
        "synchronous": SYNCHRONOUS,
        "python": platform.python_version(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "server": f"SQLite {version()} (wal, synchronous {SYNCHRONOUS})",
    }


class SqliteSide:
    """The bench's probe of the file and its scratch ceiling file beside it."""

    shape = SHAPE
    histories: Sequence[History] = ()

    def __init__(self, site: Site, c: BenchConfig, sync: Sync) -> None:
        if not isinstance(site, SqliteSite):
            raise TypeError(f"a SQLite bench needs a SQLite site, got {site!r}")
        self.site = site
        self.path = site.file
        self.scratch = self.path.with_name(f"{self.path.stem}-ceiling.db")
        self.server = f"SQLite {version()}"
        self._probe: SqliteProbe | None = None

    @contextlib.asynccontextmanager
    async def running(self, log: TextIO) -> AsyncIterator[dict[str, Any]]:
        """The file migrated (its sessions stay behind), the scratch file made (removed at
        the end) and the probe connected."""
        await self.site.migrate()
        try:
            sqlite_ceiling.create(self.scratch)
            facts = machine()
            facts["load_average_start"] = load_average()
            self._probe = await SqliteProbe.connect(self.path)
            try:
                yield facts
            finally:
                await self._probe.close()
        finally:
            for name in (
                self.scratch,
                *(self.scratch.with_name(self.scratch.name + s) for s in ("-wal", "-shm")),
            ):
                name.unlink(missing_ok=True)

    async def ceiling(self, n: int, seconds: float) -> float:
        return await sqlite_ceiling.measure(self.scratch, n, seconds)

    def ledger(self, site: Site) -> SqliteProbe:
        if self._probe is None:
            raise RuntimeError("the SQLite bench side is not running")
        return self._probe

    async def forget(self, history: History, ids: Sequence[str]) -> None:
        raise NotImplementedError("SQLite has no history phase")

    def ceiling_report(self) -> dict[str, str]:
        return {
            "shape": sqlite_ceiling.SHAPE,
            "how": "N processes, one connection each, on a scratch file beside the database, "
            "for ceiling_seconds",
            "n": "the phase's writer processes: P for drains, 1 for appends (one process)",
        }
