"""Streams and wakeups on PostgreSQL: the LISTEN connection and the poll that feed them.

One dedicated connection per store (not from the pool) listens on the schema's
channel. A notification carries only ``{"session_id", "head"}``: streams read the
events themselves from the table, so a lost or duplicated signal can only delay
them, never skip or repeat an event. The same loop polls every ``poll_interval``
(sessions with claimable heads for wakeups, session heads for streams) and after
every reconnect, so missed notifications, backoff expiries, lease lapses and a
listener that never hears anything (behind a transaction-mode pooler) still reach
every subscriber. Writes of this store signal its own subscribers directly too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row
from psycopg_pool import PoolTimeout

from ..backoff import Backoff
from ..models import StoredEvent
from ..wakeups import Wakeups
from .errors import connection_lost
from .queries import query

log = logging.getLogger("a2pg.postgres.streams")

READY_POLL_LIMIT = 1000
"""Oldest ready heads a wakeups poll looks at (their sessions are announced)."""

PING_PREFIX = "ping "
"""A listener's health check: ``ping <backend pid>``, sent to itself; never announced."""

POLL_TIMEOUT_FACTOR = 5
"""A poll slower than this many poll intervals (at least 5s) counts as a dead connection."""

CHANNEL_PREFIX = "a2pg_"
MAX_CHANNEL_BYTES = 63

Connect = Callable[[], Awaitable[AsyncConnection[Any]]]
ReadAfter = Callable[[int], Awaitable[list[StoredEvent]]]


def channel_name(schema: str) -> str:
    """The NOTIFY channel of a schema: ``a2pg_<schema>``, cut to PostgreSQL's 63 bytes."""
    raw = (CHANNEL_PREFIX + schema).encode()[:MAX_CHANNEL_BYTES]
    return raw.decode(errors="ignore")


class Listener:
    """Fans signals out to this store's streams and wakeups; owns the LISTEN connection."""

    def __init__(
        self,
        *,
        connect: Connect,
        channel: str,
        poll_interval: float,
        clock: Callable[[], datetime] | None,
        reconnect: Backoff | None = None,
    ) -> None:
        self._connect = connect
        self._channel = channel
        self._poll_interval = poll_interval
        self._clock = clock
        self._reconnect = reconnect or Backoff(base=0.1, cap=5.0)
        self._streams: dict[str, set[asyncio.Event]] = {}
        self._heads: dict[str, int] = {}
        self._wakeups: weakref.WeakSet[Wakeups] = weakref.WeakSet()
        self._task: asyncio.Task[None] | None = None
        self._conn: AsyncConnection[Any] | None = None
        self._ping = ""
        self.closed = False
        self.connected = asyncio.Event()
        self.hears_itself: bool | None = None
        """Whether the last connection received its own ping (None: not known yet)."""

    # -- signals ---------------------------------------------------------------------------

    def committed(self, session_id: str, head: int | None = None) -> None:
        """New events may be readable in ``session_id``: its streams look again."""
        if head is not None:
            known = self._heads.get(session_id)
            if known is not None and head <= known:
                return
            if session_id in self._streams:
                self._heads[session_id] = head
        for signal in self._streams.get(session_id, ()):
            signal.set()

    def work(self, session_id: str | None) -> None:
        """Claimable work may have appeared (in ``session_id`` when known)."""
        for subscriber in list(self._wakeups):
            subscriber.push(session_id)

    # -- subscriptions ---------------------------------------------------------------------

    async def stream(
        self, session_id: str, after: int, read_after: ReadAfter
    ) -> AsyncIterator[StoredEvent]:
        """Events after ``after`` read from the table in index order, then live ones."""
        signal = asyncio.Event()
        self._streams.setdefault(session_id, set()).add(signal)
        self.start()
        try:
            last = after
            failures = 0
            while not self.closed:
                signal.clear()
                try:
                    batch = await read_after(last)
                    failures = 0
                except psycopg.OperationalError as exc:
                    if not (connection_lost(exc) or isinstance(exc, PoolTimeout)):
                        raise
                    failures += 1  # the database is away: wait for it, the stream lives on
                    delay = self._reconnect.delay(failures)
                    log.warning("a2pg stream cannot read (%s); again in %.2fs", exc, delay)
                    await asyncio.sleep(delay)
                    continue
                if not batch:
                    await signal.wait()
                    continue
                for event in batch:
                    yield event
                last = batch[-1].index
        finally:
            subscribers = self._streams.get(session_id)
            if subscribers is not None:
                subscribers.discard(signal)
                if not subscribers:
                    del self._streams[session_id]
                    self._heads.pop(session_id, None)

    def wakeups(self) -> Wakeups:
        subscriber = Wakeups(self)
        self._wakeups.add(subscriber)
        with contextlib.suppress(RuntimeError):  # no running loop yet: starts on first use
            self.start()
        return subscriber

    def unsubscribe(self, subscriber: Wakeups) -> None:
        self._wakeups.discard(subscriber)

    # -- the connection --------------------------------------------------------------------

    def start(self) -> None:
        """Starts the listening task (once; restarted if it died)."""
        if self.closed or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"a2pg listener {self._channel}"
        )

    async def close(self) -> None:
        """Stops listening and ends every stream and wakeups iterator."""
        self.closed = True
        for signals in self._streams.values():
            for signal in signals:
                signal.set()
        for subscriber in list(self._wakeups):
            subscriber.wake()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._drop_connection()

    async def _run(self) -> None:
        failures = 0
        while not self.closed:
            try:
                await self._listen()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the listener must outlive anything but close()
                failures += 1
                delay = self._reconnect.delay(failures)
                if isinstance(exc, psycopg.Error | OSError):
                    log.warning(
                        "a2pg listener lost its connection (%s); again in %.2fs", exc, delay
                    )
                else:
                    log.exception("a2pg listener failed; again in %.2fs", delay)
                await self._drop_connection()
                await asyncio.sleep(delay)  # the next connection polls for what was missed

    async def _listen(self) -> None:
        conn = await self._connect()
        self._conn = conn
        await conn.execute(sql.SQL("listen {}").format(sql.Identifier(self._channel)))
        self._ping = f"{PING_PREFIX}{conn.info.backend_pid}"
        await conn.execute("select pg_notify(%s, %s)", (self._channel, self._ping))
        self.hears_itself = None
        self.connected.set()
        # Whatever was announced while we were not listening is found by a poll; a
        # subscriber may also have missed something, so it hears "unknown" too.
        await self._poll(conn)
        self.work(None)
        pings_due = 3
        while not self.closed:
            async for notify in conn.notifies(timeout=self._poll_interval):
                self._dispatch(notify.payload)
            await self._poll(conn)
            if self.hears_itself is None:
                pings_due -= 1
                if pings_due == 0:
                    self.hears_itself = False
                    log.warning(
                        "a2pg listener on %r never heard its own notification: LISTEN "
                        "does not work on this connection (a transaction-mode pooler?); "
                        "streams and wakeups fall back to polling every %ss",
                        self._channel,
                        self._poll_interval,
                    )

    def _dispatch(self, payload: str) -> None:
        if payload.startswith(PING_PREFIX):
            if payload == self._ping:
                self.hears_itself = True
            return
        try:
            message = json.loads(payload)
            session_id = message["session_id"]
            head = int(message["head"])
        except (ValueError, KeyError, TypeError):
            log.warning("a2pg listener ignored a malformed notification: %r", payload)
            return
        if not isinstance(session_id, str):
            return
        self.committed(session_id, head)
        self.work(session_id)

    async def _poll(self, conn: AsyncConnection[Any]) -> None:
        """What notifications may have missed; a poll that hangs means a dead connection."""
        limit = max(5.0, POLL_TIMEOUT_FACTOR * self._poll_interval)
        try:
            await asyncio.wait_for(self._look(conn), limit)
        except TimeoutError:
            raise psycopg.OperationalError(f"the listener's poll took over {limit}s") from None

    async def _look(self, conn: AsyncConnection[Any]) -> None:
        """Sessions with claimable heads (for wakeups) and the heads of streamed sessions."""
        if self._wakeups:
            now = None if self._clock is None else self._clock()
            cur = await conn.execute(
                query("ready_sessions"), {"now": now, "limit": READY_POLL_LIMIT}
            )
            for (session_id,) in await cur.fetchall():
                self.work(session_id)
        if self._streams:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(query("session_heads"), {"session_ids": sorted(self._streams)})
            for row in await cur.fetchall():
                self.committed(row["session_id"], int(row["head"]))

    async def _drop_connection(self) -> None:
        self.connected.clear()
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
