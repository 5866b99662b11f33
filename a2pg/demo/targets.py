"""Where the demo runs: a PostgreSQL database, or a SQLite file.

Each target migrates its database, opens the demo's own store and probe, says how its
``a2pg worker`` processes reach it, and tells when they have connected (so startup is
not timed as throughput).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..store import Store


class Counts(Protocol):
    @property
    def events(self) -> int: ...

    @property
    def live(self) -> int: ...

    @property
    def dead(self) -> int: ...


class Probe(Protocol):
    """The counts the demo polls while workers run (``postgres.probe``, ``sqlite.probe``)."""

    async def counts(self) -> Counts: ...

    async def close(self) -> None: ...


class Target(Protocol):
    async def migrate(self) -> None: ...

    def open_store(self) -> contextlib.AbstractAsyncContextManager[Store]: ...

    async def probe(self) -> Probe: ...

    async def describe(self, probe: Probe) -> str:
        """The database, for the report: ``PostgreSQL 15.4``, ``SQLite 3.40.1``."""
        ...

    def worker(self, name: str) -> tuple[list[str], dict[str, str]]:
        """The options and environment of one ``a2pg worker`` process called ``name``."""
        ...

    async def connected(self, probe: Probe, prefix: str, log: Path) -> int:
        """How many workers whose names start with ``prefix`` have connected."""
        ...


@dataclass(frozen=True, slots=True)
class PostgresTarget:
    """A PostgreSQL database and schema; workers get the demo's ``--pooler``/``--prepare``."""

    dsn: str
    schema: str | None
    store_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def _schema(self) -> str:
        from ..postgres.layout import DEFAULT_SCHEMA

        return self.schema or DEFAULT_SCHEMA

    async def migrate(self) -> None:
        from ..postgres.migrate import upgrade

        await asyncio.to_thread(upgrade, self.dsn, self._schema)

    def open_store(self) -> contextlib.AbstractAsyncContextManager[Store]:
        from ..postgres.connect import open_store

        return open_store(self.dsn, self.schema, **self.store_options)

    async def probe(self) -> Probe:
        from ..postgres.dsn import to_libpq
        from ..postgres.probe import Probe as PostgresProbe

        return await PostgresProbe.connect(to_libpq(self.dsn), self._schema)

    async def describe(self, probe: Probe) -> str:
        from ..postgres.probe import Probe as PostgresProbe

        assert isinstance(probe, PostgresProbe)
        return f"PostgreSQL {await probe.server_version()}"

    def worker(self, name: str) -> tuple[list[str], dict[str, str]]:
        """Named with ``application_name`` so ``pg_stat_activity`` shows it."""
        from ..postgres.dsn import with_options

        env = {"A2PG_DSN": with_options(self.dsn, application_name=name)}
        if self.schema:
            env["A2PG_SCHEMA"] = self.schema
        args: list[str] = []
        if self.store_options.get("pooler") is not None:
            args += ["--pooler", str(self.store_options["pooler"])]
        if self.store_options.get("prepare") is not None:
            args.append("--prepare" if self.store_options["prepare"] else "--no-prepare")
        return args, env

    async def connected(self, probe: Probe, prefix: str, log: Path) -> int:
        from ..postgres.probe import Probe as PostgresProbe

        assert isinstance(probe, PostgresProbe)
        return await probe.connected(prefix)


SERVING = re.compile(r"a2pg\.worker: worker \S+ serving ")
"""The line each ``a2pg worker`` logs (at INFO) once it serves, its SIGTERM handler in
place: the demo stops no worker before that, so each one stops cleanly."""


@dataclass(frozen=True, slots=True)
class SqliteTarget:
    """A SQLite file; workers log at INFO, and a worker has connected once its line saying
    what it serves is in the log (SQLite keeps no list of its connections)."""

    path: Path

    async def migrate(self) -> None:
        from ..sqlite.migrate import upgrade

        await asyncio.to_thread(upgrade, self.path)

    @contextlib.asynccontextmanager
    async def _store(self) -> AsyncIterator[Store]:
        from ..sqlite import SqliteStore

        store = await SqliteStore.open(self.path)
        try:
            yield store
        finally:
            await store.close()

    def open_store(self) -> contextlib.AbstractAsyncContextManager[Store]:
        return self._store()

    async def probe(self) -> Probe:
        from ..sqlite.probe import SqliteProbe

        return await SqliteProbe.connect(self.path)

    async def describe(self, probe: Probe) -> str:
        from ..sqlite.probe import version

        return f"SQLite {version()}"

    def worker(self, name: str) -> tuple[list[str], dict[str, str]]:
        return ["--sqlite", str(self.path), "--log-level", "INFO"], {}

    async def connected(self, probe: Probe, prefix: str, log: Path) -> int:
        def serving() -> int:
            if not log.exists():
                return 0
            lines = log.read_text(errors="replace").splitlines()
            return sum(1 for line in lines if SERVING.search(line))

        return await asyncio.to_thread(serving)
