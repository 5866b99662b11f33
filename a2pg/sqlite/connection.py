"""SQLite connections for an event loop: each one used only by a thread of its own.

``sqlite3`` calls block (and a write may wait on another process's lock for up to
``busy_timeout``), so no call runs on the event loop: each ``Connection`` owns one
thread, and every use of it is a function shipped to that thread. The module opens
files the same way everywhere: ``mode=rw`` (opening never creates a file, only the
migration does), autocommit (the store issues BEGIN itself), WAL checked, the busy
timeout and synchronous level set.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal, TypeVar

from ..errors import A2Error, StoreUnavailable, store_closed

T = TypeVar("T")

SQLITE_BUSY = 5
SQLITE_CANTOPEN = 14
"""SQLite's primary result codes for a file locked past the busy timeout and a file
that cannot be opened (a folder, a missing folder's file, no permission)."""

BUSY_TIMEOUT = 10.0
"""Seconds a statement waits for another connection's write lock before failing with
``database is locked``: writes of other processes hold it for milliseconds."""

Synchronous = Literal["normal", "full"]
"""``normal`` (the seed's): in WAL mode a commit survives a crash of the process, and the
last commits may be lost (never corrupted) if the machine loses power; ``full`` syncs
every commit to disk."""

SYNCHRONOUS_LEVELS: tuple[Synchronous, ...] = ("normal", "full")

MIN_SQLITE = (3, 37, 0)
"""STRICT tables (3.37), RETURNING (3.35), UPDATE ... FROM (3.33): what the store uses."""


def check_library() -> None:
    """The SQLite library Python was built with must be recent enough for the store."""
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        wanted = ".".join(map(str, MIN_SQLITE))
        raise A2Error(
            "STORE_NOT_CONFIGURED",
            f"a2pg's SQLite backend needs SQLite {wanted} or newer; this Python's sqlite3 "
            f"module has {sqlite3.sqlite_version}",
        )


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def outage(exc: BaseException) -> StoreUnavailable | None:
    """``STORE_UNAVAILABLE`` for a file that cannot be opened, or that another process
    kept locked past the busy timeout (as a PostgreSQL lock or pool timeout is one);
    None for any other error. The same words whoever reads it: the store, or
    ``a2pg.backends.classify`` for an error of ``sqlite3`` itself."""
    if not isinstance(exc, sqlite3.OperationalError):
        return None
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF  # the primary code
    text = first_line(exc)
    if code == SQLITE_CANTOPEN or "unable to open" in text:
        return StoreUnavailable(message=f"cannot open the SQLite database: {text}")
    if code == SQLITE_BUSY:
        return StoreUnavailable(
            message=f"the SQLite database stayed locked past its busy timeout: {text} "
            "(another process holds its write lock)"
        )
    return None


def check_path(path: object) -> Path:
    """A database file path: a non-empty ``str`` or ``os.PathLike``, no NUL."""
    if not isinstance(path, str | os.PathLike):
        raise A2Error("INVALID_ARGUMENT", f"path must be a str or a path, got {path!r}")
    text = os.fspath(path)
    if not isinstance(text, str) or not text or "\x00" in text or text == ":memory:":
        raise A2Error("INVALID_ARGUMENT", f"path must name a database file, got {text!r}")
    return Path(text)


def check_synchronous(value: object) -> Synchronous:
    for level in SYNCHRONOUS_LEVELS:
        if value == level:
            return level
    raise A2Error("INVALID_ARGUMENT", f"synchronous must be 'normal' or 'full', got {value!r}")


def check_interval(value: object, name: str, *, zero: bool = False) -> float:
    """A number of seconds for a setting of ``open``: finite and above 0 (0 too, with
    ``zero``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise A2Error("INVALID_ARGUMENT", f"{name} must be a number of seconds, got {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero):
        bound = "0 or more" if zero else "above 0"
        raise A2Error("INVALID_ARGUMENT", f"{name} must be {bound} seconds, got {value!r}")
    return seconds


def connect(
    path: Path,
    *,
    create: bool = False,
    busy_timeout: float = BUSY_TIMEOUT,
    synchronous: Synchronous = "normal",
) -> sqlite3.Connection:
    """An autocommit connection to ``path`` (``create``: made when missing) with dict-like
    rows; usable from any one thread at a time."""
    check_library()
    uri = f"{path.absolute().as_uri()}?mode={'rwc' if create else 'rw'}"
    conn = sqlite3.connect(
        uri, uri=True, timeout=busy_timeout, isolation_level=None, check_same_thread=False
    )
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"pragma busy_timeout = {round(busy_timeout * 1000)}")
        conn.execute(f"pragma synchronous = {synchronous}")
    except BaseException as exc:
        conn.close()
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            from .layout import LayoutStatus

            raise LayoutStatus("foreign", str(path), None).error() from None
        raise
    return conn


def use_wal(conn: sqlite3.Connection, *, busy_timeout: float = BUSY_TIMEOUT) -> None:
    """WAL mode (kept in the file): readers never wait for the writer, nor it for them.

    Switching a new file to WAL takes its lock from a shared one, and SQLite answers
    "database is locked" at once, without its busy handler, to a connection that would
    deadlock with another doing the same: so several processes creating one file at
    once try again here, for at most ``busy_timeout`` seconds.
    """
    deadline = time.monotonic() + busy_timeout
    pause = 0.001
    while True:
        try:
            row = conn.execute("pragma journal_mode = wal").fetchone()
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    if row is None or str(row[0]).lower() != "wal":
        raise sqlite3.OperationalError(f"the database cannot use WAL mode (got {row and row[0]})")


class Connection:
    """One sqlite3 connection and the thread that alone uses it (see ``open``).

    What reaches the caller is the store's errors, not ``sqlite3``'s, where they mean an
    outage: a file that cannot be opened or stays locked past the busy timeout is
    ``STORE_UNAVAILABLE`` (``outage``), and so is a call once the connection is closed.
    """

    def __init__(self, conn: sqlite3.Connection, executor: ThreadPoolExecutor) -> None:
        self._conn = conn
        self._executor = executor
        self.closed = False

    @classmethod
    async def open(cls, name: str, opener: Callable[[], sqlite3.Connection]) -> Connection:
        """Opens a connection with ``opener`` on a new thread named ``name``, which then
        runs every use of it (opening may wait on a lock too)."""
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        try:
            conn = await asyncio.get_running_loop().run_in_executor(executor, opener)
        except BaseException as exc:
            executor.shutdown(wait=False)
            found = outage(exc)
            if found is not None:
                raise found from exc
            raise
        return cls(conn, executor)

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` on the connection's thread. A caller cancelled meanwhile does
        not stop it: the function runs to its end (its transaction commits or rolls back)."""
        if self.closed:
            raise store_closed()
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, functools.partial(fn, self._conn))
        except sqlite3.OperationalError as exc:
            found = outage(exc)
            if found is None:
                raise
            raise found from exc

    async def close(self) -> None:
        """Lets queued calls finish, then closes the connection and its thread."""
        if self.closed:
            return
        self.closed = True
        loop = asyncio.get_running_loop()
        with contextlib.suppress(sqlite3.Error):
            await loop.run_in_executor(self._executor, self._conn.close)
        await asyncio.to_thread(self._executor.shutdown, wait=True)
