"""``a2pg worker --wait``: a worker started before its database waits for it, saying so.

With a real closed port, and with a private server of the test's own that is stopped
and started under a running worker process.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import TextIO

import pytest

from a2pg.models import NewEvent, Target
from a2pg.postgres import PostgresStore
from a2pg.postgres.migrate import upgrade
from a2pg.testing import EmbeddedPostgres, create_database, unique_name

from .conftest import A2PG, Cli, closed_port_dsn

ROOT = Path(__file__).resolve().parents[2]
POLL = 0.3
"""The workers' poll interval here: they must log at least once per interval while away."""
SLACK = 1.5
"""Seconds of scheduling slack a loaded 2-core machine may add to any timing."""
RETRY_LINE = re.compile(r"cannot reach the database at (\S+) \(try (\d+): .*\); next try in ")


def test_wait_0_exits_3_at_once(cli: Cli) -> None:
    started = time.monotonic()
    result = cli("worker", "tests.cli.sample_app:app", "--wait", "0", "--dsn", closed_port_dsn())
    assert result.code == 3
    assert time.monotonic() - started < SLACK
    assert result.err.startswith("a2pg: error: cannot reach the database at postgres@127.0.0.1:")


def test_wait_retries_with_warnings_then_exits_3(
    cli: Cli, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="a2pg.worker")
    dsn = closed_port_dsn()
    started = time.monotonic()
    result = cli(
        *("worker", "tests.cli.sample_app:app", "--wait", "2", "--poll-interval", str(POLL)),
        *("--dsn", dsn),
    )
    took = time.monotonic() - started
    assert result.code == 3
    assert 2.0 <= took < 2.0 + POLL + SLACK
    assert "after waiting 2s" in result.err and result.err.count("\n") == 1
    retries = [RETRY_LINE.search(r.getMessage()) for r in caplog.records]
    tries = [int(m.group(2)) for m in retries if m is not None]
    assert tries == list(range(1, len(tries) + 1)) and len(tries) >= 2.0 / POLL
    assert {m.group(1) for m in retries if m} == {dsn.removeprefix("postgresql://")}
    gaps = [b.created - a.created for a, b in itertools.pairwise(caplog.records)]
    assert max(gaps) < POLL + 0.25  # the backoff is capped at the poll interval: never silent


# --- a real worker process and a server that comes and goes ------------------------------


def _warnings(stderr: str) -> list[tuple[datetime, str]]:
    """The worker's WARNING lines with their times (``%(asctime)s`` has milliseconds)."""
    found = []
    for line in stderr.splitlines():
        stamp, _, rest = line.partition(" WARNING ")
        if rest:
            found.append((datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f"), rest))
    return found


def _largest_gap(lines: list[tuple[datetime, str]], start: datetime, end: datetime) -> float:
    """The longest silence, in seconds, between ``start`` and ``end`` (both counted)."""
    times = [start, *(t for t, _ in lines if start <= t <= end), end]
    return max((b - a).total_seconds() for a, b in itertools.pairwise(times))


async def _append(dsn: str, n: int) -> None:
    store = await PostgresStore.open(dsn)
    try:
        await store.append("w1", [NewEvent("ping", n, targets=(Target("echo"),))])
    finally:
        await store.close()


async def _echoes(dsn: str) -> int:
    store = await PostgresStore.open(dsn)
    try:
        return sum(1 for e in await store.read("w1") if e.type == "echoed")
    finally:
        await store.close()


def _wait_for_echoes(dsn: str, count: int, proc: subprocess.Popen[str], within: float) -> float:
    """Seconds until the worker has echoed ``count`` pings."""
    started = time.monotonic()
    while asyncio.run(_echoes(dsn)) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - started < within, f"not {count} echoes after {within}s"
        time.sleep(0.05)
    return time.monotonic() - started


def _wait_for_retries(err: TextIO, count: int, proc: subprocess.Popen[str], within: float) -> None:
    """Until the worker's stderr holds ``count`` "cannot reach" lines (it kept waiting)."""
    started = time.monotonic()
    while True:
        err.seek(0)
        if len(RETRY_LINE.findall(err.read())) >= count:
            return
        assert proc.poll() is None, "the worker gave up instead of waiting"
        assert time.monotonic() - started < within, f"not {count} retries after {within}s"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_worker_waits_for_a_server_that_comes_up_and_survives_it_going_away(
    private_postgres: EmbeddedPostgres, tmp_path: Path
) -> None:
    dsn = create_database(private_postgres.dsn(), unique_name("a2pg_wait"))
    upgrade(dsn)
    asyncio.run(_append(dsn, 1))
    private_postgres.stop()
    err = (tmp_path / "worker.err").open("w+")
    proc = subprocess.Popen(
        [
            *(str(A2PG), "worker", "tests.cli.sample_app:app", "--dsn", dsn, "--wait", "60"),
            *("--poll-interval", str(POLL), "--ttl", "30", "--log-level", "INFO"),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=err,
        text=True,
    )
    try:
        # The worker starts while the server is down: it waits, saying so. Its start-up
        # (Python, imports) may take seconds on a loaded machine: the server comes up
        # once it has said so three times, not after a fixed time.
        _wait_for_retries(err, 3, proc, within=60)
        private_postgres.start()
        up = datetime.now()
        _wait_for_echoes(dsn, 1, proc, within=POLL + 10)

        private_postgres.stop()  # and goes away again under the running worker
        down = datetime.now()
        time.sleep(2.0)
        private_postgres.start()
        back = datetime.now()
        asyncio.run(_append(dsn, 2))
        resumed = _wait_for_echoes(dsn, 2, proc, within=15)

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err.seek(0)
    log = err.read()
    assert "Traceback" not in log, log
    lines = _warnings(log)
    assert len([1 for _, text in lines if RETRY_LINE.search(text)]) >= 3, log
    assert re.search(r"connected to postgres@127\.0\.0\.1:\d+/a2pg_wait_\w+ after \d+ tries", log)
    assert _largest_gap(lines, lines[0][0], up) < POLL + 0.5, log  # waiting at start
    assert _largest_gap(lines, down, back) < POLL + 0.5, log  # the outage while running
    assert "the database answers again" in log
    assert resumed < 2 * POLL + 5.0, log  # the pool reconnects; the next poll finds the work
