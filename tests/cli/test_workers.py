"""``a2pg workers`` and ``a2pg consumers`` beside real worker processes, one then SIGKILLed."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2pg import __version__
from a2pg.models import Consumer, LogSpec
from a2pg.postgres import PostgresStore

from .conftest import A2PG, Cli
from .stores import wait_for, with_store

ROOT = Path(__file__).resolve().parents[2]
ORPHAN = Consumer("orphan", LogSpec(lane="orphan"))
"""Registered, and served by no worker."""


@pytest.fixture
def worker(postgres_dsn: str) -> Iterator[subprocess.Popen[str]]:
    """``a2pg worker tests.cli.log_app:app`` beating every 0.2s (stale after 0.6s)."""

    async def register(store: PostgresStore) -> None:
        await store.register_consumers([ORPHAN])

    with_store(postgres_dsn, register)
    proc = subprocess.Popen(
        [
            str(A2PG),
            "worker",
            "tests.cli.log_app:app",
            "--dsn",
            postgres_dsn,
            "--concurrency",
            "3",
            "--heartbeat-interval",
            "0.2",
            "--log-level",
            "warning",
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
        proc.communicate(timeout=30)


def listing(cli: Cli, dsn: str) -> dict[str, Any]:
    result = cli("workers", "--json", "--dsn", dsn)
    assert result.code == 0, result
    data: dict[str, Any] = json.loads(result.out)
    return data


def test_workers_shows_a_live_worker_then_marks_it_stale(
    cli: Cli, postgres_dsn: str, worker: subprocess.Popen[str]
) -> None:
    def live() -> bool:
        """the worker's first heartbeat"""
        assert worker.poll() is None, worker.communicate()
        return any(not w["stale"] for w in listing(cli, postgres_dsn)["workers"])

    wait_for(live)
    data = listing(cli, postgres_dsn)
    [row] = data["workers"]
    assert (row["host"], row["pid"], row["consumers"]) == (
        socket.gethostname(),
        worker.pid,
        ["echo", "journal"],
    )
    assert (row["concurrency"], row["in_flight"], row["version"]) == (3, 0, __version__)
    assert row["interval"] == 0.2
    assert row["holder"].startswith(f"{socket.gethostname()}:{worker.pid}:")
    assert data["unserved_consumers"] == ["orphan"]
    forget = cli("workers", "--forget-stale", "--json", "--dsn", postgres_dsn)
    assert json.loads(forget.out) == {"forgotten": []}  # a live worker stays

    table = cli("workers", "--dsn", postgres_dsn).out.splitlines()
    assert table[0].split()[:4] == ["HOLDER", "HOST", "PID", "CONSUMERS"]
    assert table[2].split()[1:5] == [socket.gethostname(), str(worker.pid), "echo,journal", "3"]
    assert table[2].endswith(" live")
    assert table[3:] == ["consumer orphan: registered, no live worker"]

    consumers = cli("consumers", "--dsn", postgres_dsn).out.splitlines()
    table_end = consumers.index("")  # the legend follows a blank line
    served = {line.split()[0]: line.split()[1:3] for line in consumers[2:table_end] if "  " in line}
    assert served["journal"] == ["yes", "1"]  # registered, served by one live worker
    assert served["echo"] == ["no", "1"]  # targeted: listed because the live worker serves it
    assert served["orphan"] == ["yes", "0"]
    assert consumers[table_end - 1] == "consumer orphan: registered, no live worker"

    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=30)

    def stale() -> bool:
        """the killed worker marked stale"""
        return all(w["stale"] for w in listing(cli, postgres_dsn)["workers"])

    wait_for(stale)
    table = cli("workers", "--dsn", postgres_dsn).out.splitlines()
    assert table[2].endswith(" STALE")
    assert table[3:] == [
        "consumer journal: registered, no live worker",
        "consumer orphan: registered, no live worker",
    ]
    forget = cli("workers", "--forget-stale", "--json", "--dsn", postgres_dsn)
    assert json.loads(forget.out) == {"forgotten": [row["holder"]]}
    assert listing(cli, postgres_dsn)["workers"] == []


def test_no_workers(cli: Cli, postgres_dsn: str) -> None:
    result = cli("workers", "--dsn", postgres_dsn)
    assert (result.code, result.out) == (0, "no workers\n")
    forget = cli("workers", "--forget-stale", "--dsn", postgres_dsn)
    assert (forget.code, forget.out) == (0, "forgot 0 stale workers\n")
    assert json.loads(cli("workers", "--json", "--dsn", postgres_dsn).out) == {
        "workers": [],
        "unserved_consumers": [],
    }
