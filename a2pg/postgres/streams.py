"""Streams and wakeups on PostgreSQL: the LISTEN connection and the poll that feed them.

One dedicated connection per store (not from the pool) listens on the schema's
channel. A notification only says "look at session X": any role that may connect
can send one, so nothing in it is trusted. Streams read the events themselves from
the table and wakeups lead to claims that check the table, so a lost, duplicated or
forged signal can only delay or cost a read, never skip, repeat or hold back an
event. The same loop polls every ``poll_interval`` (sessions with claimable heads
for wakeups, session heads for streams) and after every reconnect, so missed
notifications, backoff expiries, lease lapses and a listener that never hears
anything still reach every subscriber. Behind a transaction-mode pooler, where
LISTEN silently never fires, the store does not listen at all and the poll alone
feeds them. Writes of this store signal its own subscribers directly too.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row
from psycopg_pool import PoolTimeout

from ..backoff import Backoff
from ..feeds import Feed
from .deadlines import BACKSTOP, sever
from .errors import connection_lost
from .queries import Statements

log = logging.getLogger("a2pg.postgres.streams")

READY_POLL_LIMIT = 1000
"""Oldest ready heads a wakeups poll looks at (their sessions are announced)."""

PING_PREFIX = "ping "
"""A listener's health check: ``ping <backend pid>``, sent to itself; never announced."""

POLL_TIMEOUT_FACTOR = 5
"""A poll slower than this many poll intervals (at least 5s, at most the store's
``call_timeout``) counts as a dead connection."""

CHANNEL_PREFIX = "a2pg_"
MAX_CHANNEL_BYTES = 63
CHANNEL_HASH_CHARS = 16
"""Hex digits of the schema's hash in the channel of a schema too long to spell out."""

Connect = Callable[[], Awaitable[AsyncConnection[Any]]]
Scrub = Callable[[str], str]


def channel_name(schema: str) -> str:
    """The NOTIFY channel of a schema: ``a2pg_<schema>`` when that fits PostgreSQL's 63
    bytes, else ``a2pg_<start of schema>_<hash of the whole name>``, so two long schemas
    that share a prefix never share a channel."""
    whole = CHANNEL_PREFIX + schema
    if len(whole.encode()) <= MAX_CHANNEL_BYTES:
        return whole
    digest = hashlib.sha256(schema.encode()).hexdigest()[:CHANNEL_HASH_CHARS]
    room = MAX_CHANNEL_BYTES - len(CHANNEL_PREFIX) - 1 - CHANNEL_HASH_CHARS
    start = schema.encode()[:room].decode(errors="ignore")
    return f"{CHANNEL_PREFIX}{start}_{digest}"


def unreachable(exc: BaseException) -> bool:
    """Whether a stream's read failed because the database is away (it waits, then reads
    again) rather than because it refused the read (the stream raises)."""
    return connection_lost(exc) or isinstance(exc, PoolTimeout)


def parse_notification(payload: str, max_length: int) -> tuple[str, int | None] | None:
    """The session a notification names and, on Citus, its row's shard (``shard``); None
    when it names no session a store could hold.

    The payload is ``{"session_id": ..., ...}``; anything else in it (older a2pg sent the
    session's head) is ignored: a notification is a hint to look, never a fact.
    """
    if not payload.startswith("{"):
        return None
    try:
        message = json.loads(payload)
    except (ValueError, RecursionError):  # a forged '{"a": [[[[...' nests past the stack
        return None
    if not isinstance(message, dict):
        return None
    session_id = message.get("session_id")
    if not isinstance(session_id, str) or not 0 < len(session_id) <= max_length:
        return None
    shard = message.get("shard")
    return session_id, shard if type(shard) is int else None


class Listener:
    """Feeds this store's streams and wakeups (``feed``); owns the LISTEN connection."""

    def __init__(
        self,
        *,
        connect: Connect,
        statements: Statements,
        channel: str,
        poll_interval: float,
        clock: Callable[[], datetime] | None,
        max_session_id: int,
        listen: bool = True,
        scrub: Scrub = str,
        reconnect: Backoff | None = None,
    ) -> None:
        self._connect = connect
        self.statements = statements
        self._channel = channel
        self._poll_interval = poll_interval
        self._clock = clock
        self._max_session_id = max_session_id
        self._listen_enabled = listen
        self._scrub = scrub
        self._reconnect = reconnect or Backoff(base=0.1, cap=5.0)
        self.feed = Feed(self, transient=unreachable, scrub=scrub, retry=self._reconnect)
        self._malformed = 0
        self._task: asyncio.Task[None] | None = None
        self._conn: AsyncConnection[Any] | None = None
        self.call_timeout: float | None = None
        """The store's deadline for one call, which a poll never exceeds (None: no bound
        but the poll interval's). An idle connection whose peer vanished is found by its
        TCP keepalives."""
        self._ping = ""
        self.connected = asyncio.Event()
        self.hears_itself: bool | None = None
        """Whether the last connection received its own ping (None: not known yet)."""
        self.on_shard: Callable[[int], None] | None = None
        """Told the shard a notification names (on Citus: ``Shards.woke``)."""

    # -- the connection (the feed's source) ------------------------------------------------

    def start(self) -> None:
        """Starts the listening task (once; restarted if it died)."""
        if self.feed.closed or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"a2pg listener {self._channel}"
        )

    async def stop(self) -> None:
        """Stops listening and closes the connection."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._drop_connection()

    async def _run(self) -> None:
        failures = 0
        while not self.feed.closed:
            try:
                await self._listen()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the listener must outlive anything but close()
                failures += 1
                delay = self._reconnect.delay(failures)
                if isinstance(exc, psycopg.OperationalError | OSError):
                    reason = self._scrub(str(exc))
                    log.warning(
                        "a2pg listener lost its connection (%s); again in %.2fs", reason, delay
                    )
                elif isinstance(exc, psycopg.Error):
                    # Connected, but refused (a revoked grant, a dropped table): retrying
                    # cannot help until someone fixes it, so say what to fix, loudly.
                    log.error(
                        "a2pg listener was refused by the database (%s: %s); streams and "
                        "wakeups hear nothing until that is fixed; again in %.2fs",
                        type(exc).__name__,
                        self._scrub(str(exc)),
                        delay,
                    )
                else:
                    log.exception("a2pg listener failed; again in %.2fs", delay)
                await self._drop_connection()
                await asyncio.sleep(delay)  # the next connection polls for what was missed

    async def _listen(self) -> None:
        conn = await self._connect()
        self._conn = conn
        if not self._listen_enabled:
            await self._poll_only(conn)
            return
        async with self._bounded(conn, "LISTEN"):
            await conn.execute(sql.SQL("listen {}").format(sql.Identifier(self._channel)))
            self._ping = f"{PING_PREFIX}{conn.info.backend_pid}"
            await conn.execute("select pg_catalog.pg_notify(%s, %s)", (self._channel, self._ping))
        self.hears_itself = None
        self.connected.set()
        # Whatever was announced while we were not listening is found by a poll; a
        # subscriber may also have missed something, so it hears "unknown" too.
        await self._poll(conn)
        self.feed.work(None)
        pings_due = 3
        while not self.feed.closed:
            async for notify in conn.notifies(timeout=self._poll_interval):
                self._dispatch(notify.payload)
            await self._poll(conn)
            if self.hears_itself is None:
                pings_due -= 1
                if pings_due == 0:
                    self.hears_itself = False
                    log.warning(
                        "a2pg listener on %r never heard its own notification: LISTEN "
                        "does not work on this connection (a transaction-mode pooler? "
                        "then open the store with pooler='transaction'); streams and "
                        "wakeups fall back to polling every %ss",
                        self._channel,
                        self._poll_interval,
                    )

    async def _poll_only(self, conn: AsyncConnection[Any]) -> None:
        """Behind a transaction-mode pooler: no LISTEN (it would never fire), only the poll."""
        self.connected.set()
        await self._poll(conn)
        self.feed.work(None)
        while not self.feed.closed:
            await asyncio.sleep(self._poll_interval)
            await self._poll(conn)

    def _dispatch(self, payload: str) -> None:
        if payload.startswith(PING_PREFIX):
            if payload == self._ping:
                self.hears_itself = True
            return
        parsed = parse_notification(payload, self._max_session_id)
        if parsed is None:
            # Anyone who may connect can notify: say so once, not once per forgery.
            self._malformed += 1
            level = logging.WARNING if self._malformed == 1 else logging.DEBUG
            log.log(level, "a2pg listener ignored a notification: %r", payload[:200])
            return
        session_id, shard = parsed
        if shard is not None and self.on_shard is not None:
            self.on_shard(shard)
        self.feed.committed(session_id)
        self.feed.work(session_id)

    async def _poll(self, conn: AsyncConnection[Any]) -> None:
        """What notifications may have missed; a poll that hangs means a dead connection."""
        async with self._bounded(conn, "poll"):
            await self._look(conn)

    @contextlib.asynccontextmanager
    async def _bounded(self, conn: AsyncConnection[Any], what: str) -> AsyncIterator[None]:
        """The block's statements may take ``POLL_TIMEOUT_FACTOR`` poll intervals (at
        least 5s, at most ``call_timeout``): past that the connection counts as dead. Its
        socket is shut down, so the pending read fails at once (cancelling the read
        instead would have psycopg wait up to 10s for a dead server), and the block
        raises ``OperationalError``: the listener reconnects."""
        limit = max(5.0, POLL_TIMEOUT_FACTOR * self._poll_interval)
        if self.call_timeout is not None:
            limit = min(limit, self.call_timeout)
        fired = False

        def cut() -> None:
            nonlocal fired
            fired = True
            sever(conn)

        handle = asyncio.get_running_loop().call_later(limit, cut)
        try:
            async with asyncio.timeout(limit + BACKSTOP):  # should nothing wake the read
                yield
        except (TimeoutError, psycopg.OperationalError):
            if not fired:
                raise
            raise psycopg.OperationalError(f"the listener's {what} took over {limit:g}s") from None
        finally:
            handle.cancel()

    async def _look(self, conn: AsyncConnection[Any]) -> None:
        """Sessions with claimable heads (for wakeups) and the heads of streamed sessions."""
        if self.feed.wants_work:
            now = None if self._clock is None else self._clock()
            cur = await conn.execute(
                self.statements.query("ready_sessions"), {"now": now, "limit": READY_POLL_LIMIT}
            )
            for (session_id,) in await cur.fetchall():
                self.feed.work(session_id)
        streamed = self.feed.streamed()
        if streamed:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(self.statements.query("session_heads"), {"session_ids": streamed})
            for row in await cur.fetchall():
                self.feed.head_seen(row["session_id"], int(row["head"]))

    async def _drop_connection(self) -> None:
        self.connected.clear()
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
