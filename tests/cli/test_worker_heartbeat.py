"""``a2pg worker`` processes in ``store.workers()``: listed while they run, gone after SIGTERM,
left behind by SIGKILL and stale once three heartbeats are missed (by the database's clock)."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import a2pg
from a2pg import WorkerInfo

from .conftest import A2PG

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
INTERVAL = 0.2
WAIT = 30.0


async def _workers(dsn: str) -> list[WorkerInfo]:
    from a2pg.postgres import PostgresStore

    store = await PostgresStore.open(dsn)
    try:
        return await store.workers()
    finally:
        await store.close()


def workers_once(dsn: str, wanted: Callable[[list[WorkerInfo]], bool]) -> list[WorkerInfo]:
    """``workers()`` as soon as ``wanted`` holds of it, polled for at most WAIT seconds."""
    deadline = time.monotonic() + WAIT
    while not wanted(listed := asyncio.run(_workers(dsn))):
        assert time.monotonic() < deadline, f"never seen: {listed}"
        time.sleep(INTERVAL / 4)
    return listed


@contextmanager
def worker_process(dsn: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [
            str(A2PG),
            "worker",
            "tests.cli.sample_app:app",
            *("--dsn", dsn, "--heartbeat-interval", str(INTERVAL), "--log-level", "warning"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=WAIT)


def pids(listed: list[WorkerInfo]) -> set[int]:
    return {info.beat.pid for info in listed}


def test_a_stopped_worker_goes_and_a_killed_one_stays_and_turns_stale(postgres_dsn: str) -> None:
    with worker_process(postgres_dsn) as stopped, worker_process(postgres_dsn) as killed:
        both = {stopped.pid, killed.pid}
        listed = workers_once(postgres_dsn, lambda ws: pids(ws) == both)
        for info in listed:
            assert (info.beat.host, info.beat.consumers) == (socket.gethostname(), ("echo",))
            assert (info.beat.version, info.beat.interval) == (a2pg.__version__, INTERVAL)
            assert info.beat.holder.startswith(f"{socket.gethostname()[:200]}:{info.beat.pid}:")

        killed.send_signal(signal.SIGKILL)
        stopped.send_signal(signal.SIGTERM)
        _out, err = stopped.communicate(timeout=WAIT)
        assert stopped.returncode == 0, err
        assert killed.wait(timeout=WAIT) == -signal.SIGKILL

        [left] = workers_once(postgres_dsn, lambda ws: pids(ws) == {killed.pid})
        [stale] = workers_once(postgres_dsn, lambda ws: all(w.stale for w in ws))
        assert stale.beat.pid == killed.pid
        assert stale.seen_ago > 3 * INTERVAL
        assert stale.last_seen == left.last_seen  # nobody beat for it since
