"""Every store call's deadline: what ends a call on a connection that went silent.

A database host that vanishes without a reset (a partition, a dead load balancer)
leaves its sockets open and silent; TCP alone gives up after 15 minutes to 2 hours.
So each store call (``Database.run``, ``write_one``, ``write``: pool wait, retries and
every round trip included) runs under a ``Deadline`` of the store's ``call_timeout``.
When it passes:

- a call holding a connection has that connection *abandoned*: the socket's read side
  is shut down, so the call's pending read fails at once (psycopg's own cancellation
  would first wait up to 10s for the dead server) and the pool discards the
  connection: a silent socket is never reused. A cancel request goes in the background
  (bounded by ``CANCEL_TIMEOUT``), so a server that is only slow, or waits on a lock,
  stops the statement; the socket is closed once it is through;
- a call waiting for the pool, or between retries, is cancelled.

Either way the call raises ``CallTimeout``, an outage. Nothing here relies on the
connection's state or on startup options, so it works the same behind PgBouncer in
transaction mode. TCP keepalives and ``tcp_user_timeout`` (``connect.KEEPALIVES``)
also end a dead idle connection, the LISTEN one included, within tens of seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from psycopg import AsyncConnection, pq
from psycopg.pq.abc import PGcancel, PGcancelConn, PGconn

from ..errors import invalid
from .errors import CallTimeout

log = logging.getLogger("a2pg.postgres")

CALL_TIMEOUT = 30.0
"""Seconds a store call may take, round trips, retries and the wait for a connection
included, before it fails with ``CallTimeout``."""

CANCEL_TIMEOUT = 10.0
"""Seconds the cancel request of an abandoned statement may take (a silent server never
answers it)."""

BACKSTOP = 1.0
"""Seconds after abandoning its connection that a call still running is cancelled."""

Conn = AsyncConnection[Any]


def check_call_timeout(value: object) -> float:
    """A positive, finite number of seconds: every call has a deadline."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(f"call_timeout must be a positive number of seconds: got {value!r}")
    if not (value > 0 and math.isfinite(value)):
        raise invalid(f"call_timeout must be a positive number of seconds: got {value!r}")
    return float(value)


class Deadline:
    """One store call's deadline (``Abandoner.deadline`` makes one)."""

    __slots__ = ("_abandoner", "_conn", "_force", "_timeout", "expired", "seconds")

    def __init__(self, seconds: float, abandoner: Abandoner, timeout: asyncio.Timeout) -> None:
        self.seconds = seconds
        self.expired = False
        self._abandoner = abandoner
        self._timeout = timeout
        self._conn: Conn | None = None
        self._force: asyncio.TimerHandle | None = None

    def error(self) -> CallTimeout:
        return CallTimeout(
            f"the database did not answer within {self.seconds:g}s (the store's call_timeout);"
            " its connection was dropped"
        )

    def attach(self, conn: Conn) -> None:
        """The call now waits on ``conn``: at the deadline, it is abandoned, not cancelled."""
        if self.expired:
            raise self.error()
        self._conn = conn

    def detach(self) -> None:
        self._conn = None

    def _expire(self) -> None:
        self.expired = True
        loop = asyncio.get_running_loop()
        conn = self._conn
        if conn is None or conn.closed:
            self._timeout.reschedule(loop.time())  # waiting for the pool, or between tries
            return
        self._abandoner.abandon(conn)  # the pending read fails now
        self._force = loop.call_later(BACKSTOP, self._close_outright, conn)

    def _close_outright(self, conn: Conn) -> None:
        """The call still waits on its abandoned connection (a write into a full buffer,
        which a closed read side does not wake): the socket is shut down both ways, and
        should even that not end the call, it is cancelled."""
        if self._conn is not conn:
            return
        sever(conn)
        self._timeout.reschedule(asyncio.get_running_loop().time() + BACKSTOP)

    def _done(self) -> None:
        if self._force is not None:
            self._force.cancel()
        self._conn = None


class Abandoner:
    """Makes the deadlines of one store's calls, and the cancel requests they leave behind."""

    def __init__(self, call_timeout: float = CALL_TIMEOUT) -> None:
        self.call_timeout = check_call_timeout(call_timeout)
        self._cancels: set[asyncio.Task[None]] = set()

    @contextlib.asynccontextmanager
    async def deadline(self) -> AsyncIterator[Deadline]:
        """The block may take ``call_timeout`` seconds; past that it raises ``CallTimeout``
        (from the error its abandoned connection raised, if any)."""
        loop = asyncio.get_running_loop()
        deadline: Deadline | None = None
        try:
            async with asyncio.timeout(None) as timeout:
                deadline = Deadline(self.call_timeout, self, timeout)
                handle = loop.call_later(self.call_timeout, deadline._expire)
                try:
                    yield deadline
                finally:
                    handle.cancel()
                    deadline._done()
        except TimeoutError:
            if deadline is None or not deadline.expired:
                raise
            raise deadline.error() from None
        except psycopg.Error as exc:
            if deadline is None or not deadline.expired or isinstance(exc, CallTimeout):
                raise
            raise deadline.error() from exc

    def abandon(self, conn: Conn) -> None:
        """Gives ``conn`` up: whatever waits to read on it fails at once, the pool then
        discards it, and its statement gets a cancel request in the background.

        Only the socket's read side is shut down at first, which the peer does not see,
        and the socket is kept open (a duplicate descriptor) until the cancel request is
        through: a peer told of the close first (PgBouncer) would forget whose statement
        it was, and leave it running. Then the socket is shut down and closed.
        """
        if conn.closed:
            return  # lost already
        pgconn = conn.pgconn
        try:
            held = socket.socket(fileno=os.dup(pgconn.socket))
        except (OSError, psycopg.OperationalError):
            sever(conn)
            return
        with contextlib.suppress(OSError):
            held.shutdown(socket.SHUT_RD)
        try:
            self._cancel_then_close(pgconn, held)
        except psycopg.Error as exc:
            log.debug("could not cancel an abandoned statement: %s", exc)
            _close(held)
        log.warning(
            "a2pg store call got no answer within %gs (call_timeout): its connection "
            "is dropped and its statement cancelled",
            self.call_timeout,
        )

    def _cancel_then_close(self, pgconn: PGconn, held: socket.socket) -> None:
        if psycopg.capabilities.has_cancel_safe():
            cancel = pgconn.cancel_conn()  # made now: it copies what it needs of pgconn
            task = asyncio.get_running_loop().create_task(
                _send_cancel(cancel, held), name="a2pg-cancel"
            )
            self._cancels.add(task)
            task.add_done_callback(self._cancels.discard)
        else:  # libpq before 17 can only cancel blocking: in a thread of its own
            old = pgconn.get_cancel()
            threading.Thread(target=_cancel_blocking, args=(old, held), daemon=True).start()

    def close(self) -> None:
        """Stops the cancel requests still in flight (their sockets are closed)."""
        for task in list(self._cancels):
            task.cancel()


def sever(conn: Conn) -> None:
    """Shuts ``conn``'s socket down, leaving its descriptor open: a read or write pending
    on it fails at once (libpq: the server closed the connection), the connection is
    then closed (``broken``), and a pool discards it. No reset, no wait for the peer."""
    try:
        fd = conn.pgconn.socket
    except psycopg.OperationalError:
        return  # lost already
    # A duplicate of the descriptor: shutdown acts on the socket itself, and closing the
    # duplicate leaves libpq's own descriptor to libpq.
    with (
        contextlib.suppress(OSError),
        socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM) as sock,
    ):
        sock.shutdown(socket.SHUT_RDWR)


def _close(held: socket.socket) -> None:
    """Shuts down and closes the kept socket of an abandoned connection."""
    with contextlib.suppress(OSError):
        held.shutdown(socket.SHUT_RDWR)
    held.close()


async def _send_cancel(cancel: PGcancelConn, held: socket.socket) -> None:
    """Sends one cancel request without blocking the loop, within ``CANCEL_TIMEOUT``;
    then closes the abandoned connection's socket."""
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(CANCEL_TIMEOUT):
            cancel.start()
            while (status := cancel.poll()) != pq.PollingStatus.OK:
                if status == pq.PollingStatus.FAILED:
                    log.debug("cancel request failed: %s", cancel.get_error_message())
                    return
                await _ready(loop, cancel.socket, writing=status == pq.PollingStatus.WRITING)
    except (TimeoutError, psycopg.Error, OSError) as exc:
        log.debug("cancel request not delivered: %r", exc)
    finally:
        cancel.finish()
        _close(held)


async def _ready(loop: asyncio.AbstractEventLoop, fd: int, *, writing: bool) -> None:
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    if writing:
        loop.add_writer(fd, wake)
    else:
        loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        if writing:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


def _cancel_blocking(cancel: PGcancel, held: socket.socket) -> None:
    try:
        cancel.cancel()
    except psycopg.Error as exc:
        log.debug("cancel request failed: %s", exc)
    finally:
        _close(held)
