"""Appends on the application's sqlite3 connection, in its transaction (``SqliteStore.append_in``).

An application that commits its own rows and then calls ``append`` makes two commits (a
dual write). ``append_in`` runs the store's append (``log.append``, through a ``Tx``) on
the application's own ``sqlite3.Connection`` to the store's file instead, inside the
transaction it has open: the events and their cursors commit or roll back with the
application's rows. Streams and wakeups of every store on the file (this one's too) learn
of them as they learn of another process's commit, from ``PRAGMA data_version`` (see
``streams``): only once the application commits.

The statements run on the calling thread, at once: a ``sqlite3`` connection belongs to
the thread that made it (``check_same_thread``), and the file is local, so an append
costs microseconds to milliseconds of the event loop. What may take longer is a wait
for the file's write lock (another process writing): the caller's own ``busy_timeout``
bounds it. An application that begins its transaction with ``BEGIN IMMEDIATE`` (or
writes its rows first) holds the lock already, and the append never waits.

The connection is used with care: its ``row_factory`` stays the caller's (each statement
runs on a cursor of its own with ``sqlite3.Row`` rows, ``_Rows``), and nothing is
committed. When the connection is idle in Python's default (non-autocommit) mode, the
append begins the transaction with ``BEGIN IMMEDIATE`` and the caller commits it. The
append's statements run in a savepoint: when it raises, the caller's transaction is as
it was (when the append began it, it is rolled back).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from ..contract.args import AppendArgs
from ..errors import A2Error, StoreUnavailable, invalid
from ..ids import Clock, IdGenerator
from ..models import AppendResult, Consumer
from . import log
from .connection import outage
from .database import DUPLICATE_ID, Tx
from .layout import inspect_connection
from .registry import registered

SAVEPOINT = "a2pg_append_in"
"""The savepoint the append's statements run in, inside the caller's transaction."""

SQLITE_BUSY_SNAPSHOT = 517
"""A transaction whose snapshot predates another connection's commit, trying to write."""


class _Rows:
    """The caller's connection as the area functions use one (``execute``): each statement
    on a cursor of its own with ``sqlite3.Row`` rows, so the connection's own
    ``row_factory`` is never read or changed."""

    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Any = ()) -> sqlite3.Cursor:
        cur = self._conn.cursor()
        cur.row_factory = sqlite3.Row
        return cur.execute(sql, parameters)


def autocommits(conn: sqlite3.Connection) -> bool:
    """Whether each statement outside an explicit transaction commits on its own:
    ``autocommit=True`` (Python 3.12+), or ``isolation_level=None`` in the legacy mode."""
    mode = getattr(conn, "autocommit", None)  # Python 3.12+; -1 is the legacy mode
    if mode is True or mode is False:
        return mode
    return conn.isolation_level is None


def check_connection(conn: object) -> sqlite3.Connection:
    """The caller's connection, if an append can join its transaction (else
    ``INVALID_ARGUMENT``): an open ``sqlite3.Connection`` in a transaction, or idle in
    Python's default (non-autocommit) mode (the append then begins one)."""
    if not isinstance(conn, sqlite3.Connection):
        raise invalid(f"conn must be a sqlite3.Connection, got {type(conn).__name__}")
    try:
        # Python 3.13 reads in_transaction from any thread but autocommit only from the
        # connection's own: both read here, so either refusal is one clear error.
        in_transaction = conn.in_transaction
        autocommit = not in_transaction and autocommits(conn)
    except sqlite3.ProgrammingError as exc:
        if "thread" in str(exc):
            raise invalid(f"conn cannot be used here: {exc}") from None
        raise invalid("conn is closed") from None
    if autocommit:
        raise invalid(
            "conn is in autocommit mode outside a transaction: the events would commit on "
            'their own; begin one first (conn.execute("begin immediate"))'
        )
    return conn


def _same_file(found: str, path: Path) -> bool:
    if not found:
        return False
    try:
        return os.path.samefile(found, path)
    except OSError:
        return False


class Caller:
    """One ``append_in`` on the caller's connection (checked by ``check_connection``)."""

    def __init__(
        self, conn: sqlite3.Connection, *, path: Path, clock: Clock, new_id: IdGenerator
    ) -> None:
        self.conn = conn
        self.rows = _Rows(conn)
        self.path = path
        self.clock = clock
        self.new_id = new_id

    @property
    def _as_conn(self) -> sqlite3.Connection:
        """``rows`` where a function of the area modules wants a connection: they only
        ``execute`` (through ``database.one``, ``rows`` and ``run``)."""
        return cast(sqlite3.Connection, self.rows)

    def check_file(self) -> None:
        """The connection must be on the store's file (one pragma, no table read): on a
        file without the current layout, that file's ``STORE_NOT_CONFIGURED``; on
        another a2pg file, ``INVALID_ARGUMENT`` (its registry and watchers are not this
        store's)."""
        try:
            found = self.rows.execute("pragma database_list").fetchall()
        except sqlite3.ProgrammingError as exc:  # another thread's connection
            raise invalid(f"conn cannot be used here: {exc}") from None
        file = next((str(row["file"]) for row in found if row["name"] == "main"), "")
        if _same_file(file, self.path):
            return
        status = inspect_connection(self._as_conn, Path(file or ":memory:"))
        if not status.is_current:
            raise status.error()
        raise invalid(f"conn is on the database {file}, not on the store's {self.path}")

    async def wake_set(self, consumers: Sequence[Consumer] | None) -> Sequence[Consumer]:
        """The log consumers the append wakes: those named, else the registry as the
        caller's connection reads it."""
        return registered(self._as_conn) if consumers is None else consumers

    def append(self, args: AppendArgs, wake: Sequence[Consumer]) -> AppendResult:
        """``log.append`` in the caller's transaction, in a savepoint (begun with ``BEGIN
        IMMEDIATE`` when the connection was idle); an empty batch only reads."""
        if not args.events:
            return AppendResult([], log.pending_now(self._as_conn, args.session_id, args.consumers))
        began = not self.conn.in_transaction
        try:
            if began:
                self.rows.execute("begin immediate")
            self.rows.execute(f"savepoint {SAVEPOINT}")
            try:
                result = log.append(Tx(self._as_conn, self.clock(), self.new_id), args, wake)
                self.rows.execute(f"release savepoint {SAVEPOINT}")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self.rows.execute(f"rollback to savepoint {SAVEPOINT}")
                    self.rows.execute(f"release savepoint {SAVEPOINT}")
                raise
        except BaseException as exc:
            if began and self.conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.rollback()
            found = translated(exc)
            if found is None:
                raise
            raise found from exc
        return result


def translated(exc: BaseException) -> A2Error | None:
    """The store's error for a ``sqlite3`` one, as ``Database.write`` and ``Connection``
    give it (None: raise it as it is)."""
    if isinstance(exc, sqlite3.IntegrityError) and DUPLICATE_ID in str(exc):
        return A2Error("PARTIAL_DUPLICATE_BATCH", "an event id of the batch is already stored")
    if getattr(exc, "sqlite_errorcode", None) == SQLITE_BUSY_SNAPSHOT:
        return StoreUnavailable(
            message="conn's transaction read the file before another connection's commit "
            "and cannot write now: roll it back and run it again, begun with BEGIN IMMEDIATE"
        )
    return outage(exc)
