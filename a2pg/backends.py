"""The backends as the outer layers (CLI, demo, bench, dashboard) reach them: one entry each.

Each backend's folder holds its entry (``postgres/backend.py``, ``sqlite/backend.py``):
how to open its store from a command's options, migrate and check it, probe it,
describe it, what the demo's and bench's processes need of it, and how its driver's
errors read as one backend-neutral ``A2Error``. This module lists the entries and picks
one, so nothing above it switches on the backend or imports a driver. ``MemoryStore``
has no entry: it lives in one process, which no command, worker process or dashboard
of another process can reach.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

from .errors import A2Error
from .front import CheckedStore
from .postgres.backend import BACKEND as POSTGRES
from .sqlite.backend import BACKEND as SQLITE

NOWHERE = "the database"
"""Where an outage happened, for its message, when nothing names the database."""


@dataclass(frozen=True, slots=True)
class Options:
    """Where a command's store is, as its options say: with ``sqlite`` (``--sqlite
    [PATH]``) the SQLite file ``path`` (None: a temporary one), else PostgreSQL at
    ``dsn`` (None: a throwaway embedded server) in ``schema``, with the ``pooler`` and
    ``prepare`` settings given (None: the environment's, else the store's defaults), and
    how long a PostgreSQL migration's DDL waits for a lock (``lock_timeout``, seconds;
    None: the migration's default) and, on Citus, how many shards it gives the session
    tables (``citus_shards``; None: the environment's, else Citus's default)."""

    sqlite: bool = False
    path: Path | None = None
    dsn: str | None = None
    schema: str | None = None
    pooler: str | None = None
    prepare: bool | None = None
    lock_timeout: float | None = None
    citus_shards: int | None = None


class Layout(Protocol):
    """What a database holds, compared with what this a2pg expects (``a2pg check``)."""

    @property
    def state(self) -> str: ...

    @property
    def is_current(self) -> bool: ...

    @property
    def revision(self) -> str | None: ...

    @property
    def expected(self) -> str: ...

    def describe(self) -> str: ...

    def fix(self) -> str: ...


class Counts(Protocol):
    @property
    def events(self) -> int: ...

    @property
    def live(self) -> int: ...

    @property
    def dead(self) -> int: ...


class Probe(Protocol):
    """Cheap counts the demo polls while its worker processes run, on a connection of
    its own (the Store protocol has no "how much work is left everywhere")."""

    async def counts(self) -> Counts: ...

    async def connected(self, prefix: str) -> int | None:
        """How many clients named ``prefix...`` have connected (None: it cannot tell)."""
        ...

    async def server(self) -> str:
        """The database, for reports: ``PostgreSQL 15.4``, ``SQLite 3.40.1``."""
        ...

    async def close(self) -> None: ...


class Site(Protocol):
    """One backend's database, where a command's options put it (picklable)."""

    @property
    def backend(self) -> str:
        """Its entry's name in ``BACKENDS``."""
        ...

    @property
    def server(self) -> bool:
        """Whether it is a server that may come up after a worker (``--wait`` waits)."""
        ...

    def describe(self) -> str:
        """Where it is, for messages and logs, never with a password."""
        ...

    def check(self) -> None:
        """Refuses malformed options (``INVALID_ARGUMENT``) before anything connects."""
        ...

    def open_store(
        self, *, pool_size: int | None = None
    ) -> AbstractAsyncContextManager[CheckedStore]:
        """Its store, checked migrated, closed on exit; ``pool_size`` fixes a pool."""
        ...

    async def reachable(self) -> None:
        """Raises the driver's outage, quickly, when the database cannot be reached."""
        ...

    async def layout(self) -> Layout: ...

    async def migrate(self) -> Layout:
        """Migrates it to the head revision; returns the layout after."""
        ...

    def write_migration_sql(self, out: TextIO) -> None:
        """The migration's SQL, for a DBA (``INVALID_ARGUMENT`` where there is none)."""
        ...

    def throwaway(
        self, purpose: str, say: Callable[[str], None]
    ) -> AbstractContextManager[tuple[Site, str]]:
        """This database and ``the given`` (or the like), or when the options name none
        a throwaway one for ``purpose`` (``demo``, ``bench``) and how reports call it;
        what it needs is checked at the call, before anything starts."""
        ...

    def worker_options(self, name: str) -> tuple[list[str], dict[str, str]]:
        """The options and environment of an ``a2pg worker`` process called ``name``."""
        ...

    async def probe(self) -> Probe: ...


class Backend(Protocol):
    """A backend's entry (``BACKEND`` of its folder's ``backend.py``)."""

    @property
    def name(self) -> str: ...

    def site(self, options: Options) -> Site: ...

    def outage(self, exc: BaseException, where: str) -> A2Error | None:
        """``STORE_UNAVAILABLE`` when ``exc`` is this backend's driver saying the
        database cannot be reached (``where`` names it in the message), else None."""
        ...

    def failure(self, exc: BaseException) -> str | None:
        """Any other error of this backend's driver, on one line; None for the rest."""
        ...


BACKENDS: Mapping[str, Backend] = {POSTGRES.name: POSTGRES, SQLITE.name: SQLITE}


def select(options: Options) -> Site:
    """The database the options name: the SQLite file of ``--sqlite``, else PostgreSQL
    (a DSN, or none for a throwaway embedded server)."""
    return BACKENDS[SQLITE.name if options.sqlite else POSTGRES.name].site(options)


def classify(exc: BaseException, where: str = NOWHERE) -> A2Error | None:
    """``exc`` as a backend-neutral error: an ``A2Error`` as it is, a driver's outage as
    ``STORE_UNAVAILABLE`` (whichever backend's driver raised it); None otherwise."""
    if isinstance(exc, A2Error):
        return exc
    for backend in BACKENDS.values():
        found = backend.outage(exc, where)
        if found is not None:
            return found
    return None


def failure(exc: BaseException) -> str | None:
    """Some backend's driver error that is no outage (a refused statement, a full
    disk), on one line; None for anything else."""
    for backend in BACKENDS.values():
        found = backend.failure(exc)
        if found is not None:
            return found
    return None
