"""SQLite as ``a2pg.backends`` lists it: what the CLI, demo, bench and dashboard need.

The store opened on the file of ``--sqlite PATH``, migrated and checked, a temporary
file for ``demo`` and ``bench`` when PATH is left out, the options of the demo's worker
processes, and ``sqlite3``'s errors read as backend-neutral ones (where the store has not
already: ``SqliteStore`` raises ``STORE_UNAVAILABLE`` itself, see ``connection.outage``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

from ..errors import A2Error, StoreUnavailable, invalid
from .connection import first_line, outage
from .layout import LayoutStatus

if TYPE_CHECKING:
    from .probe import SqliteProbe
    from .store import SqliteStore


def failure(exc: BaseException) -> str | None:
    """Any other ``sqlite3`` error (a full disk, a damaged file) on one line."""
    return f"database error: {first_line(exc)}" if isinstance(exc, sqlite3.Error) else None


class Given(Protocol):
    """What this entry reads of ``a2pg.backends.Options``."""

    @property
    def path(self) -> Path | None: ...


@dataclass(frozen=True, slots=True)
class SqliteSite:
    """A SQLite file; no path: a temporary one (``throwaway``). Picklable: the bench's
    worker processes open their stores from it."""

    path: Path | None

    backend = "sqlite"
    server = False
    """A file is opened at once: ``a2pg worker --wait`` does not wait for it."""

    @property
    def file(self) -> Path:
        if self.path is None:
            raise invalid("no SQLite file given: --sqlite needs a PATH here")
        return self.path

    def describe(self) -> str:
        return "a temporary SQLite file" if self.path is None else f"SQLite {self.path}"

    def check(self) -> None:
        """Nothing to check before opening: the file is looked at when opened."""

    def open_store(
        self, *, pool_size: int | None = None
    ) -> contextlib.AbstractAsyncContextManager[SqliteStore]:
        """The store on the file (``pool_size`` is PostgreSQL's: a store here has one
        writer connection and one reader)."""
        return self._store()

    @contextlib.asynccontextmanager
    async def _store(self) -> AsyncIterator[SqliteStore]:
        from .store import SqliteStore

        store = await SqliteStore.open(self.file)
        try:
            yield store
        finally:
            await store.close()

    async def reachable(self) -> None:
        """Nothing to reach: opening the file tells (``layout``, ``open_store``)."""

    async def layout(self) -> LayoutStatus:
        from .layout import inspect_file

        return await asyncio.to_thread(inspect_file, self.file)

    async def migrate(self) -> LayoutStatus:
        """Creates the file (and its folder) when missing, then migrates it; a folder
        that cannot be made is STORE_UNAVAILABLE."""
        from .migrate import upgrade

        try:
            return await asyncio.to_thread(upgrade, self.file)
        except OSError as exc:
            raise StoreUnavailable(
                message=f"cannot create the SQLite database {self.file}: {exc.strerror or exc}"
            ) from exc

    def write_migration_sql(self, out: TextIO) -> None:
        raise invalid("--sql prints PostgreSQL's migration SQL: not with --sqlite")

    def throwaway(
        self, purpose: str, say: Callable[[str], None]
    ) -> contextlib.AbstractContextManager[tuple[SqliteSite, str]]:
        """This file, or without a path a temporary one for the run, deleted after it."""
        if self.path is not None:
            return contextlib.nullcontext((self, f"the file {self.path},"))
        return self._temporary(purpose, say)

    @contextlib.contextmanager
    def _temporary(
        self, purpose: str, say: Callable[[str], None]
    ) -> Iterator[tuple[SqliteSite, str]]:
        with tempfile.TemporaryDirectory(prefix=f"a2pg-{purpose}-sqlite-") as folder:
            say(f"a temporary SQLite file in {folder}")
            yield SqliteSite(Path(folder) / f"{purpose}.db"), "a temporary file,"

    def worker_options(self, name: str) -> tuple[list[str], dict[str, str]]:
        """An ``a2pg worker`` on the file, logging at INFO: its line saying what it serves
        is how the demo knows it has started."""
        return ["--sqlite", str(self.file), "--log-level", "INFO"], {}

    async def probe(self) -> SqliteProbe:
        from .probe import SqliteProbe

        return await SqliteProbe.connect(self.file)


class SqliteBackend:
    """The entry ``a2pg.backends`` lists as ``sqlite``."""

    name = "sqlite"

    def site(self, options: Given) -> SqliteSite:
        return SqliteSite(options.path)

    def outage(self, exc: BaseException, where: str) -> A2Error | None:
        """``sqlite3``'s outages where they come raw (layout checks, the probe, the
        migration); ``SqliteStore`` raises ``STORE_UNAVAILABLE`` itself."""
        return outage(exc)

    def failure(self, exc: BaseException) -> str | None:
        return failure(exc)


BACKEND = SqliteBackend()
