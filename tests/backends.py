"""Store fixtures for every suite that runs on each backend: one table says how to open each.

Loaded by ``tests/conftest.py`` (``pytest_plugins``). ``store`` and ``make_store`` are
parametrized over the backends ``A2PG_TEST_BACKENDS`` names (comma-separated; default:
the :data:`BACKENDS` marked ``default``: memory, postgres and sqlite). Adding a backend is
one :class:`Backend` entry: where a test's data lives (made once per test) and how to open
one more client on it. SQLite's is a copy of a migrated file in the test's ``tmp_path``;
each client opened on it is another connection pair, as another process's would be.

``pgbouncer-transaction`` and ``pgbouncer-session`` (not run by default: ``.ci/run``
selects them) run the same suites through a PgBouncer of the test run's own, on schema
``a2`` of a database that also holds the layout in ``public``: after each test, every
row must be in ``a2`` (a statement that leaned on a search_path would have written to
``public``, as a store behind a transaction pooler once did).
"""

from __future__ import annotations

import os
import pathlib
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from psycopg import sql

from a2pg.contract import DEFAULT_LIMITS, Limits
from a2pg.ids import FakeClock, SequentialIds
from a2pg.store import Store

if TYPE_CHECKING:
    from a2pg.memory import MemoryStore

BACKENDS_ENV = "A2PG_TEST_BACKENDS"

MakeStore = Callable[[], Awaitable[Store]]
OpenStore = Callable[[Any, FakeClock, SequentialIds, Limits], Awaitable[Store]]
"""Opens another client of the test's storage (the same instance for memory)."""


@dataclass(frozen=True)
class Backend:
    """How the shared suites reach one Store implementation."""

    name: str
    storage: Callable[[pytest.FixtureRequest], Any]
    """Where this test's data lives (a DSN, a file path), made once per test."""
    open: OpenStore
    """One more client on ``storage``, on the test's clock, ids and limits."""
    one_instance: bool = False
    """Every ``make_store()`` returns the first client: the store is its own storage."""
    marks: tuple[pytest.MarkDecorator, ...] = ()
    default: bool = True
    """Run when ``A2PG_TEST_BACKENDS`` is not set."""


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


# -- SQLite ----------------------------------------------------------------------------


class SqliteTemplate:
    """A migrated SQLite file made once per test run; each test gets a copy of its own."""

    def __init__(self, folder: pathlib.Path) -> None:
        from a2pg.sqlite import upgrade

        self.path = folder / "template.db"
        upgrade(self.path)

    def copy(self, folder: pathlib.Path) -> pathlib.Path:
        target = folder / "a2.db"
        shutil.copyfile(self.path, target)
        return target


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> SqliteTemplate:
    return SqliteTemplate(tmp_path_factory.mktemp("sqlite-template"))


def _sqlite_file(request: pytest.FixtureRequest) -> pathlib.Path:
    """A fresh migrated database file in the test's own temporary folder."""
    template: SqliteTemplate = request.getfixturevalue("sqlite_template")
    folder: pathlib.Path = request.getfixturevalue("tmp_path")
    return template.copy(folder)


async def _open_sqlite(
    path: pathlib.Path, clock: FakeClock, ids: SequentialIds, limits: Limits
) -> Store:
    from a2pg.sqlite import SqliteStore

    return await SqliteStore.open(path, clock=clock, ids=ids, limits=limits)


# -- PostgreSQL through PgBouncer --------------------------------------------------------

BOUNCED_SCHEMA = "a2"
BOUNCED_POLL_INTERVAL = 0.05
"""Behind a transaction pooler other clients' writes reach streams and wakeups by the
poll alone: a short one keeps the suites' waits short."""


class BouncedDatabase:
    """One database with a2pg's layout in ``a2`` and in ``public``, handed from test to
    test (rows of ``a2`` deleted in between), and the check that ``public`` got nothing."""

    def __init__(self, server_dsn: str) -> None:
        from a2pg.postgres.migrate import upgrade
        from a2pg.testing import create_database, unique_name

        self.server_dsn = server_dsn
        self.name = unique_name("a2pg_bounced")
        self.dsn = create_database(server_dsn, self.name)
        upgrade(self.dsn)
        upgrade(self.dsn, schema=BOUNCED_SCHEMA)

    def _tables(self, conn: psycopg.Connection[Any], schema: str) -> list[str]:
        rows = conn.execute(
            "select table_name from information_schema.tables"
            " where table_schema = %s and table_name like 'a2!_%%' escape '!'"
            " order by table_name",
            (schema,),
        ).fetchall()
        return [str(row[0]) for row in rows]

    def written_outside(self) -> dict[str, int]:
        """Rows in ``public``'s a2pg tables (its layout records aside): none is right."""
        from a2pg.postgres.layout import VERSION_TABLE

        found: dict[str, int] = {}
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for table in self._tables(conn, "public"):
                if table in ("a2_meta", VERSION_TABLE):
                    continue
                query = sql.SQL("select count(*) from public.{}").format(sql.Identifier(table))
                row = conn.execute(query).fetchone()
                if row is not None and row[0]:
                    found[f"public.{table}"] = int(row[0])
        return found

    def check_nothing_outside(self) -> None:
        """Fails the test that wrote outside ``a2`` (and empties ``public`` for the next)."""
        found = self.written_outside()
        if found:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                for table in found:
                    conn.execute(
                        sql.SQL("delete from public.{}").format(
                            sql.Identifier(table.removeprefix("public."))
                        )
                    )
        assert not found, f"rows written outside schema {BOUNCED_SCHEMA!r}: {found}"

    def checkout(self) -> str:
        """Empties schema a2's tables (not its layout records) and returns the DSN."""
        from a2pg.postgres.layout import TABLES

        with psycopg.connect(self.dsn, autocommit=True) as conn, conn.transaction():
            for table in TABLES:
                if table != "a2_meta":
                    conn.execute(
                        sql.SQL("delete from {}.{}").format(
                            sql.Identifier(BOUNCED_SCHEMA), sql.Identifier(table)
                        )
                    )
        return self.dsn

    def drop(self) -> None:
        from a2pg.testing import drop_database

        drop_database(self.server_dsn, self.name)


@pytest.fixture(scope="session")
def bounced_database(postgres_server_dsn: str) -> Iterator[BouncedDatabase]:
    database = BouncedDatabase(postgres_server_dsn)
    yield database
    database.drop()


def _bounced(pool_mode: str) -> Callable[[pytest.FixtureRequest], str]:
    def storage(request: pytest.FixtureRequest) -> str:
        bouncer = request.getfixturevalue("pgbouncer")(pool_mode)
        database: BouncedDatabase = request.getfixturevalue("bounced_database")
        dsn = database.checkout()
        request.addfinalizer(database.check_nothing_outside)
        return str(bouncer.dsn(dsn))

    return storage


def _open_bounced(
    pooler: str,
) -> Callable[[str, FakeClock, SequentialIds, Limits], Awaitable[Store]]:
    async def open_store(dsn: str, clock: FakeClock, ids: SequentialIds, limits: Limits) -> Store:
        from a2pg.postgres import PostgresStore
        from a2pg.postgres.connect import check_pooler

        return await PostgresStore.open(
            dsn,
            schema=BOUNCED_SCHEMA,
            clock=clock,
            ids=ids,
            limits=limits,
            pooler=check_pooler(pooler),
            poll_interval=BOUNCED_POLL_INTERVAL,
        )

    return open_store


# -- Citus -----------------------------------------------------------------------------

CITUS_SHARDS = 4
"""Shards per table: two per worker node, and a truncate between tests of 4 shards per
table, not Citus's default 32."""
CITUS_SCHEMA = f"a2 citus {os.getpid()}"
"""The schema of the ``citus`` backend's layout, named so that every statement quotes it
(and apart per test run, so that runs may share a cluster)."""


class CitusDatabase:
    """One schema migrated on the coordinator of the run's Citus cluster, handed from test
    to test with its tables truncated in between: Citus keeps its metadata per database, so
    a database cloned from a template (as the ``postgres`` backend's are) would point at
    shards that were never cloned, and migrating a schema per test costs seconds."""

    def __init__(self, dsn: str) -> None:
        from a2pg.postgres.migrate import upgrade

        self.dsn = dsn
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("drop schema if exists {} cascade").format(sql.Identifier(CITUS_SCHEMA))
            )
        upgrade(dsn, schema=CITUS_SCHEMA, citus_shards=CITUS_SHARDS)

    def drop(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("drop schema {} cascade").format(sql.Identifier(CITUS_SCHEMA)))

    def checkout(self) -> str:
        """Empties the schema's tables (not its layout records) and returns the DSN.

        A DELETE per table, pipelined: on Citus a TRUNCATE of the tables took about
        330 ms (a lock on every shard, taken through two-phase commit), the deletes of
        a test's few rows about 15 ms, and the suites run it before every test."""
        from a2pg.postgres.layout import TABLES

        tables = [sql.Identifier(CITUS_SCHEMA, t) for t in TABLES if t != "a2_meta"]
        with psycopg.connect(self.dsn, autocommit=True) as conn, conn.pipeline():
            for table in tables:
                conn.execute(sql.SQL("delete from {}").format(table))
        return self.dsn


@pytest.fixture(scope="session")
def citus_database(citus_dsn: str) -> Iterator[CitusDatabase]:
    database = CitusDatabase(citus_dsn)
    yield database
    database.drop()


def _citus_storage(request: pytest.FixtureRequest) -> str:
    database: CitusDatabase = request.getfixturevalue("citus_database")
    return database.checkout()


async def _open_citus(dsn: str, clock: FakeClock, ids: SequentialIds, limits: Limits) -> Store:
    from a2pg.postgres import PostgresStore

    return await PostgresStore.open(dsn, schema=CITUS_SCHEMA, clock=clock, ids=ids, limits=limits)


BACKENDS = (
    Backend("memory", _no_storage, _open_memory, one_instance=True),
    Backend("postgres", _postgres_database, _open_postgres, marks=(pytest.mark.postgres,)),
    Backend("sqlite", _sqlite_file, _open_sqlite),
    Backend(
        "pgbouncer-transaction",
        _bounced("transaction"),
        _open_bounced("transaction"),
        marks=(pytest.mark.postgres,),
        default=False,
    ),
    Backend(
        "pgbouncer-session",
        _bounced("session"),
        _open_bounced("session"),
        marks=(pytest.mark.postgres,),
        default=False,
    ),
    Backend(
        "citus",
        _citus_storage,
        _open_citus,
        marks=(pytest.mark.postgres, pytest.mark.citus),
        default=False,
    ),
)
_BY_NAME = {backend.name: backend for backend in BACKENDS}


def selected_backends() -> list[Backend]:
    """The backends ``A2PG_TEST_BACKENDS`` names, in its order; unknown names stop the run."""
    default = ",".join(backend.name for backend in BACKENDS if backend.default)
    raw = os.environ.get(BACKENDS_ENV, default)
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
