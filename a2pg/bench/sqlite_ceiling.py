"""The SQLite write ceiling: N processes committing claim-and-complete-shaped transactions on
a scratch file beside the bench's database, as fast as the file system lets them.

Each transaction is what one claim-and-complete costs at least on SQLite: ``BEGIN
IMMEDIATE`` (the file's write lock), a single-row INSERT, a single-row UPDATE by primary
key, COMMIT, on a connection in WAL mode at the store's synchronous level. Writers take
turns on the lock, so more processes do not raise the ceiling: they show what turn-taking
costs. One process per connection, all started at once.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

from ..sqlite.connection import connect, use_wal
from .errors import BenchFailed
from .pool import context

SHAPE = "BEGIN IMMEDIATE; INSERT one row; UPDATE that row by primary key; COMMIT"
STARTUP_TIMEOUT = 60.0
START_DELAY = 0.1
"""Seconds between every process being ready and the common start."""


def create(path: Path) -> None:
    """The scratch file and its table (emptied before each measurement)."""
    conn = connect(path, create=True)
    try:
        use_wal(conn)
        conn.execute("create table if not exists ceiling (id integer primary key, n integer)")
    finally:
        conn.close()


async def measure(path: Path, n: int, seconds: float) -> float:
    """Commits/s of ``n`` processes over ``seconds``, all starting at once."""
    return await asyncio.to_thread(_measure, path, n, seconds)


def _measure(path: Path, n: int, seconds: float) -> float:
    conn = connect(path)
    conn.execute("delete from ceiling")
    conn.close()
    ctx = context()
    ready: Any = ctx.Queue()
    results: Any = ctx.Queue()
    start = ctx.Value("d", 0.0)
    go = ctx.Event()
    procs = [
        ctx.Process(
            target=ceiling_process,
            args=(str(path), i, n, seconds, ready, go, start, results),
            name=f"a2pg-bench-sqlite-ceiling-{i}",
            daemon=True,
        )
        for i in range(n)
    ]
    for proc in procs:
        proc.start()
    try:
        for _ in procs:
            message = ready.get(True, STARTUP_TIMEOUT)
            if message != "ready":
                raise BenchFailed(f"the SQLite ceiling could not be measured: {message}")
        start.value = time.time() + START_DELAY
        go.set()
        commits = 0
        for _ in procs:
            result = results.get(True, seconds + STARTUP_TIMEOUT)
            if isinstance(result, str):
                raise BenchFailed(f"the SQLite ceiling could not be measured: {result}")
            commits += int(result)
    finally:
        go.set()
        for proc in procs:
            proc.join(10.0)
            if proc.is_alive():
                proc.kill()
    return commits / seconds


def ceiling_process(
    path: str,
    number: int,
    total: int,
    seconds: float,
    ready: Any,
    go: Any,
    start: Any,
    results: Any,
) -> None:
    """Process entry: one connection, commits from the common start for ``seconds``; keys
    ``number + total * i`` are distinct across processes."""
    try:
        conn = connect(Path(path))
    except (sqlite3.Error, OSError) as exc:
        ready.put(f"{type(exc).__name__}: {exc}")
        return
    try:
        ready.put("ready")
        if not go.wait(STARTUP_TIMEOUT):
            return
        begin = start.value
        end = begin + seconds
        while time.time() < begin:
            time.sleep(0.001)
        count, key = 0, number
        while True:
            conn.execute("begin immediate")
            conn.execute("insert into ceiling (id, n) values (?, 0)", (key,))
            conn.execute("update ceiling set n = n + 1 where id = ?", (key,))
            conn.execute("commit")
            if time.time() > end:
                break
            count += 1
            key += total
        results.put(count)
    except sqlite3.Error as exc:
        results.put(f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()
