"""SqliteStore's outages come as a2pg's ``STORE_UNAVAILABLE``, never as ``sqlite3``'s errors:
a path that cannot be opened, a write lock held past ``busy_timeout`` (by another
connection, or by a process paused while it holds it, as docs/operating/sqlite.md says).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from a2pg import NewEvent, StoreUnavailable
from a2pg.backends import classify
from a2pg.sqlite import SqliteStore

BUSY_TIMEOUT = 0.3
"""The store's busy timeout in these tests: how long a write waits for another's lock."""

WITHIN = 30.0
"""A bound on every wait: a write that hangs fails the test instead of the suite."""


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await SqliteStore.open(tmp_path / "a2.db", migrate=True, busy_timeout=BUSY_TIMEOUT)
    yield opened
    await opened.close()


@pytest.mark.parametrize("migrate", [False, True], ids=["open", "migrate"])
async def test_a_folder_as_the_path_is_store_unavailable(tmp_path: Path, migrate: bool) -> None:
    with pytest.raises(StoreUnavailable) as error:
        await SqliteStore.open(tmp_path, migrate=migrate)
    assert str(error.value) == (
        "STORE_UNAVAILABLE: cannot open the SQLite database: unable to open database file"
    )
    assert isinstance(error.value.__cause__, sqlite3.OperationalError)
    assert classify(error.value) is error.value  # the CLI and the dashboard read it as is


async def test_a_folder_that_cannot_be_made_is_store_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder would go")
    with pytest.raises(StoreUnavailable, match="cannot create the SQLite database"):
        await SqliteStore.open(blocker / "a2.db", migrate=True)


async def test_a_write_locked_past_the_busy_timeout_is_store_unavailable(
    store: SqliteStore,
) -> None:
    holder = sqlite3.connect(store.path, isolation_level=None)
    try:
        holder.execute("begin immediate")
        with pytest.raises(StoreUnavailable, match="locked past its busy timeout"):
            await asyncio.wait_for(store.append("s", [NewEvent("t")]), WITHIN)
        assert await store.read("s") == []  # reads never wait for the writer (WAL)
    finally:
        holder.close()
    [event] = (await store.append("s", [NewEvent("t")])).events  # the lock is gone
    assert event.index == 1


LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("begin immediate")
print("locked", flush=True)
sys.stdin.readline()
"""
"""A process that takes the file's write lock, says so, and holds it until told to end."""


async def test_a_process_paused_holding_the_write_lock_fails_other_writes_after_the_busy_timeout(
    store: SqliteStore,
) -> None:
    """What docs/operating/sqlite.md says: a process stopped (SIGSTOP, a debugger, a
    suspended machine) while it holds the write lock stops every write to the file; each
    write fails with STORE_UNAVAILABLE after ``busy_timeout``, none hangs; reads go on;
    once the process goes on (or dies), so do the writes."""
    await store.append("s", [NewEvent("t")])
    locker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        LOCKER,
        str(store.path),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert locker.stdin is not None and locker.stdout is not None
    try:
        assert await asyncio.wait_for(locker.stdout.readline(), WITHIN) == b"locked\n"
        locker.send_signal(signal.SIGSTOP)  # paused, the lock held
        for _ in range(2):  # each write waits out the busy timeout, then fails
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="another process holds its write lock"):
                await asyncio.wait_for(store.append("s", [NewEvent("t")]), WITHIN)
            assert time.monotonic() - started >= BUSY_TIMEOUT * 0.9
        assert [e.index for e in await store.read("s")] == [1]
        locker.send_signal(signal.SIGCONT)
        locker.stdin.write(b"end\n")
        await locker.stdin.drain()
        assert await asyncio.wait_for(locker.wait(), WITHIN) == 0
        [event] = (await store.append("s", [NewEvent("t")])).events
        assert event.index == 2
    finally:
        if locker.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                locker.send_signal(signal.SIGCONT)
                locker.kill()
            await locker.wait()
