"""The machine's commit ceiling: N raw psycopg connections committing claim-and-complete-shaped
transactions as fast as they can, in processes of their own.

Each transaction is what one claim-and-complete costs at least: BEGIN, a single-row
INSERT, a single-row UPDATE by primary key, COMMIT, four round trips on a connection
that is not autocommit. The connections are spread over ``min(N, CPU cores)``
processes, one thread per connection (the driver releases the GIL while it waits), so
Python on one core does not cap the figure. They run against a scratch table of the
bench's own in the bench's schema, on the same server, truncated before each
measurement and dropped at the end.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from ..postgres.dsn import scrub, to_libpq
from .errors import BenchFailed
from .pool import context

SHAPE = "BEGIN; INSERT one row; UPDATE that row by primary key; COMMIT"
STARTUP_TIMEOUT = 60.0
START_DELAY = 0.1
"""Seconds between all connections being ready and the common start, so all start together."""


@dataclass(frozen=True, slots=True)
class Job:
    """What one ceiling process does (picklable: it crosses a spawn)."""

    dsn: str
    table: tuple[str, str]  # schema, table
    first: int  # the global number of this process's first connection
    connections: int  # connections in this process
    total: int  # N, the connections of all processes
    seconds: float


def scratch_name() -> str:
    return f"a2pg_bench_ceiling_{uuid.uuid4().hex[:8]}"


async def create_table(conn: psycopg.AsyncConnection[Any], schema: str, table: str) -> None:
    await conn.execute(
        sql.SQL("create table {} (id bigint primary key, n integer not null)").format(
            sql.Identifier(schema, table)
        )
    )


async def drop_table(conn: psycopg.AsyncConnection[Any], schema: str, table: str) -> None:
    await conn.execute(sql.SQL("drop table if exists {}").format(sql.Identifier(schema, table)))


async def measure(
    conn: psycopg.AsyncConnection[Any], dsn: str, schema: str, table: str, n: int, seconds: float
) -> float:
    """Commits/s of ``n`` connections over ``seconds``, all starting at once."""
    await conn.execute(sql.SQL("truncate {}").format(sql.Identifier(schema, table)))
    return await asyncio.to_thread(_measure, dsn, (schema, table), n, seconds)


def _measure(dsn: str, table: tuple[str, str], n: int, seconds: float) -> float:
    ctx = context()
    procs = min(n, os.cpu_count() or 1)
    shares = [n // procs + (1 if i < n % procs else 0) for i in range(procs)]
    ready: Any = ctx.Queue()
    results: Any = ctx.Queue()
    start = ctx.Value("d", 0.0)
    go = ctx.Event()
    jobs = [Job(dsn, table, sum(shares[:i]), share, n, seconds) for i, share in enumerate(shares)]
    workers = [
        ctx.Process(
            target=ceiling_process,
            args=(job, ready, go, start, results),
            name=f"a2pg-bench-ceiling-{i}",
            daemon=True,
        )
        for i, job in enumerate(jobs)
    ]
    for proc in workers:
        proc.start()
    try:
        for _ in workers:
            message = _get(ready, workers, STARTUP_TIMEOUT)
            if message != "ready":
                raise BenchFailed(f"the commit ceiling could not be measured: {message}")
        start.value = time.time() + START_DELAY
        go.set()
        commits = 0
        for _ in workers:
            result = _get(results, workers, seconds + STARTUP_TIMEOUT)
            if isinstance(result, str):
                raise BenchFailed(f"the commit ceiling could not be measured: {result}")
            commits += int(result)
    finally:
        go.set()
        for proc in workers:
            proc.join(10.0)
            if proc.is_alive():
                proc.kill()
    return commits / seconds


def _get(source: Any, workers: list[Any], timeout: float) -> Any:
    """The next message, unless ``timeout`` passed or the processes died without sending it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return source.get(True, 0.2)
        except queue.Empty:
            alive = any(p.is_alive() for p in workers)
            if alive and time.monotonic() < deadline:
                continue
        try:
            return source.get(True, 0.2)  # sent just before its process ended
        except queue.Empty:
            raise BenchFailed("the commit ceiling processes stopped answering") from None


def ceiling_process(job: Job, ready: Any, go: Any, start: Any, results: Any) -> None:
    """Process entry: open this process's connections, say ready, commit from the common
    start for ``job.seconds``, report the commits (or the first error, as text)."""
    conns: list[psycopg.Connection[Any]] = []
    try:
        conns = [psycopg.connect(to_libpq(job.dsn)) for _ in range(job.connections)]
    except Exception as exc:
        ready.put(scrub(f"{type(exc).__name__}: {exc}", job.dsn))
        return
    try:
        ready.put("ready")
        if not go.wait(STARTUP_TIMEOUT):
            return  # the parent is gone
        begin = start.value
        counts = [0] * len(conns)
        errors: list[str] = []
        threads = [
            threading.Thread(
                target=_commit_loop,
                args=(conn, job, job.first + i, begin, counts, i, errors),
                daemon=True,
            )
            for i, conn in enumerate(conns)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        results.put(scrub(errors[0], job.dsn) if errors else sum(counts))
    finally:
        for conn in conns:
            conn.close()


def _commit_loop(
    conn: psycopg.Connection[Any],
    job: Job,
    number: int,
    begin: float,
    counts: list[int],
    slot: int,
    errors: list[str],
) -> None:
    """Commits until the end; counts the commits acknowledged before it. Keys are
    ``number + N * i``: distinct across connections, in a table truncated beforehand."""
    insert = sql.SQL("insert into {} (id, n) values (%s, 0)").format(sql.Identifier(*job.table))
    update = sql.SQL("update {} set n = n + 1 where id = %s").format(sql.Identifier(*job.table))
    end = begin + job.seconds
    key = number
    try:
        while time.time() < begin:
            time.sleep(0.001)
        while True:
            conn.execute(insert, (key,))  # psycopg sends BEGIN first: not autocommit
            conn.execute(update, (key,))
            conn.commit()
            if time.time() > end:
                return
            counts[slot] += 1
            key += job.total
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
