"""How PostgresStore reaches its database: connections, pooler settings, startup checks.

The store imports this module; opening a store from the command line's options
(``open_store``, ``A2PG_POOLER``/``A2PG_PREPARE``) is ``backend.py``'s, above the store.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool

from ..errors import invalid
from .database import Conn
from .dsn import scrub, to_libpq
from .layout import LayoutStatus, ensure_layout
from .poolers import DIRECT, Route, configure, number_statements, probe, ready

Configure = Callable[[AsyncConnection[Any]], Awaitable[None]]
Pooler = Literal["none", "session", "transaction"]
POOLERS: tuple[str, ...] = get_args(Pooler)

CONNECT_TIMEOUT = 10.0
"""Seconds a store waits for a new connection, and for each statement of its startup
(the layout check), before reporting the database unreachable."""

pool_log = logging.getLogger("psycopg.pool")
"""psycopg_pool's logger: its warnings quote connection errors, so a store scrubs them."""


def configure_connection(schema: str) -> Configure:
    """Kept for pools built for a2pg before 0.2: the store needs no connection set-up now.

    Every statement names its schema and calls ``pg_catalog`` functions, so neither the
    search_path nor the TimeZone matters; a pool of your own only needs
    ``kwargs={"autocommit": True}``. This callback does nothing (setting the
    search_path here would leak to other clients behind a transaction-mode pooler).
    """

    async def configure(conn: AsyncConnection[Any]) -> None:
        return None

    return configure


async def check_pool_connection(conn: Conn, schema: str) -> None:
    """A pool passed in must hand out autocommit connections (the store runs single
    statements outside transactions and begins its own)."""
    if not conn.autocommit:
        raise invalid(
            "the pool passed to PostgresStore.open must hand out autocommit connections: "
            "build it with kwargs={'autocommit': True}"
        )


def connection_kwargs(*, prepare: bool, timeout: float) -> dict[str, Any]:
    """What every connection of a store is opened with. ``prepare=False`` stops psycopg
    preparing statements (``prepare_threshold=None``), which a transaction-mode pooler
    without prepared-statement support breaks on."""
    kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": timeout_seconds(timeout)}
    if not prepare:
        kwargs["prepare_threshold"] = None
    return kwargs


KEEPALIVES: dict[str, int] = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}
"""libpq's TCP settings on the store's own connections. A connection whose peer vanished
without a reset (a partition, a dead load balancer) fails within about 30 s: an idle one
once its keepalive probes (after 10 s idle, then every 5 s) go unanswered, one whose
data goes unacknowledged after ``tcp_user_timeout`` (ms; Linux, where it also bounds the
probes), where TCP alone waits 15 minutes to 2 hours. Socket options of the client, so
they work behind PgBouncer in transaction mode too; no effect on a Unix socket. A DSN
that sets any of them keeps its own."""


def with_keepalives(conninfo: str) -> str:
    """``conninfo`` (as ``to_libpq`` gives it) with the ``KEEPALIVES`` it does not set."""
    given = conninfo_to_dict(conninfo)
    missing = {key: value for key, value in KEEPALIVES.items() if key not in given}
    return make_conninfo(conninfo, **missing) if missing else conninfo


def store_conninfo(dsn: str) -> str:
    """What the store's own connections (pool, LISTEN) connect with: ``dsn`` checked and
    read as libpq reads it, with TCP keepalives."""
    return with_keepalives(to_libpq(dsn))


def timeout_seconds(timeout: float) -> int:
    """libpq's ``connect_timeout`` is whole seconds (2 at least, as libpq enforces)."""
    return max(2, round(timeout))


async def connect(dsn: str, **kwargs: Any) -> Conn:
    """One connection to ``dsn`` (already checked by ``to_libpq``); a failure is a
    ``psycopg.OperationalError`` whose message holds no password."""
    try:
        return await AsyncConnection.connect(dsn, **kwargs)
    except psycopg.OperationalError as exc:
        raise psycopg.OperationalError(scrub(str(exc).strip(), dsn)) from None


async def check_reachable(dsn: str, *, connect_timeout: float = CONNECT_TIMEOUT) -> None:
    """Connects once, with a short timeout: an unreachable database fails in seconds with
    ``psycopg.OperationalError`` (a pool would keep retrying until its own timeout)."""
    conn = await connect(
        to_libpq(dsn), autocommit=True, connect_timeout=timeout_seconds(connect_timeout)
    )
    await conn.close()


class ScrubPassword(logging.Filter):
    """Removes one DSN's password from the records of a logger (psycopg_pool's warnings
    quote the driver's connection errors)."""

    def __init__(self, dsn: str) -> None:
        super().__init__()
        self._dsn = dsn

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = scrub(message, self._dsn)
        if clean != message:
            record.msg, record.args = clean, None
        return True


@dataclass
class Reach:
    """How one store reaches its database: the pool, the connection streams and wakeups
    listen and poll on, and the password kept out of what is logged."""

    pool: AsyncConnectionPool[Any]
    owns_pool: bool
    conninfo: str
    """The listen connection's DSN."""
    conn_kwargs: dict[str, Any]
    secret: str | None
    prepare: bool
    connect_timeout: float
    log_filter: ScrubPassword | None = None
    route: Route | None = None
    """What ``poolers.probe`` saw between the store and PostgreSQL (None: not probed yet)."""
    layout: LayoutStatus | None = None
    """What the layout check found (None: not checked yet)."""

    @classmethod
    async def build(
        cls,
        dsn: str | AsyncConnectionPool[Any],
        *,
        schema: str,
        min_size: int,
        max_size: int,
        listen_dsn: str | None,
        prepare: bool,
        connect_timeout: float,
    ) -> Reach:
        """Checks the settings; for a DSN, connects once and checks the layout there (an
        unreachable server fails within ``connect_timeout`` with the driver's own reason,
        where a pool would retry for 30s), then makes the pool (not yet open)."""
        if not isinstance(prepare, bool):
            raise invalid(f"prepare must be True, False or None: got {prepare!r}")
        if not (isinstance(connect_timeout, int | float) and connect_timeout > 0):
            raise invalid(f"connect_timeout must be a positive number: got {connect_timeout!r}")
        kwargs = connection_kwargs(prepare=prepare, timeout=connect_timeout)
        if isinstance(dsn, AsyncConnectionPool):
            conninfo = listen_dsn or dsn.conninfo
            if not isinstance(conninfo, str):
                raise invalid("a pool with a callable conninfo needs listen_dsn= for its LISTEN")
            given = dsn.kwargs if isinstance(dsn.kwargs, dict) else {}
            reach = cls(
                dsn, False, store_conninfo(conninfo), {**given, **kwargs}, conninfo, prepare,
                connect_timeout,
            )  # fmt: skip
        else:
            pool_conninfo = store_conninfo(dsn)
            first = await connect(pool_conninfo, **kwargs)
            try:
                second = functools.partial(connect, pool_conninfo, **kwargs)
                route = await probe(first, second, prepare=prepare, within=connect_timeout)
                layout = await ensure_layout(first, schema, statement_timeout=connect_timeout)
            finally:
                await first.close()
            pool = AsyncConnectionPool(
                pool_conninfo,
                min_size=min_size,
                max_size=max_size,
                kwargs=dict(kwargs),
                open=False,
                name=f"a2pg[{schema}]",
                configure=configure(within=connect_timeout, first_statement=route != DIRECT),
                timeout=connect_timeout,
            )
            conninfo = store_conninfo(listen_dsn or dsn)
            reach = cls(pool, True, conninfo, kwargs, dsn, prepare, connect_timeout)
            reach.route = route
            reach.layout = layout
        if reach.secret:
            reach.log_filter = ScrubPassword(reach.secret)
            pool_log.addFilter(reach.log_filter)
        return reach

    async def listen(self) -> Conn:
        """A new connection for streams and wakeups, its statements named apart, and
        (unless the store reaches PostgreSQL directly) its first statement answered within
        the connect timeout (``poolers.ready``)."""
        conn = await connect(self.conninfo, **self.conn_kwargs)
        number_statements(conn)
        if self.route != DIRECT:
            await ready(conn, self.connect_timeout)
        return conn

    def scrub(self, text: str) -> str:
        return text if self.secret is None else scrub(text, self.secret)

    async def probe_pool(self) -> None:
        """A pool passed in: ``route`` seen on one of its connections (the second, new
        one to its DSN); left None when that connection is not autocommit (``start``
        refuses the pool then)."""
        async with self.pool.connection(timeout=self.connect_timeout) as conn:
            if not conn.autocommit:
                return
            conninfo = self.pool.conninfo
            target = to_libpq(conninfo) if isinstance(conninfo, str) else self.conninfo
            second = functools.partial(connect, target, **self.conn_kwargs)
            self.route = await probe(
                conn, second, prepare=self.prepare, within=self.connect_timeout
            )

    def forget(self) -> None:
        """Undoes ``build`` for a store that will not open (its pool was never opened)."""
        if self.log_filter is not None:
            pool_log.removeFilter(self.log_filter)
            self.log_filter = None

    async def start(self, schema: str) -> None:
        """Opens the store's own pool (within the connect timeout), or checks the one
        passed in: autocommit connections, and the layout."""
        if self.owns_pool:
            await self.pool.open(wait=True, timeout=self.connect_timeout)
            return
        async with self.pool.connection() as conn:
            if not self.prepare:
                conn.prepare_threshold = None
            await check_pool_connection(conn, schema)
            self.layout = await ensure_layout(conn, schema, statement_timeout=self.connect_timeout)


def check_pooler(pooler: object, *, setting: str = "pooler") -> Pooler:
    if pooler == "none":
        return "none"
    if pooler == "session":
        return "session"
    if pooler == "transaction":
        return "transaction"
    raise invalid(f"{setting} must be one of {', '.join(POOLERS)}: got {pooler!r}")
