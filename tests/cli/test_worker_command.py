"""``a2pg worker MODULE:APP``: loads the app, works until SIGTERM, exits 0; bad specs exit 2."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path

import pytest

from a2pg.models import NewEvent, Target

from .conftest import A2PG, Cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "expected MODULE:APP"),
        ("tests.cli.nowhere:app", "cannot import module 'tests.cli.nowhere'"),
        ("tests.cli.sample_app:missing", "has no attribute 'missing'"),
        ("tests.cli.sample_app:not_an_app", "is a int, not an a2pg App"),
    ],
)
def test_bad_app_specs_exit_2(cli: Cli, postgres_dsn: str, spec: str, message: str) -> None:
    result = cli("worker", spec, "--dsn", postgres_dsn)
    assert result.code == 2
    assert message in result.err


def test_load_app_accepts_a_factory() -> None:
    from a2pg.cli.admin import load_app

    from .sample_app import app

    assert load_app("tests.cli.sample_app:make_app") is app


async def _echoes(dsn: str) -> int:
    from a2pg.postgres import PostgresStore

    store = await PostgresStore.open(dsn)
    try:
        events = await store.read("w1")
        return sum(1 for e in events if e.type == "echoed")
    finally:
        await store.close()


async def _append(dsn: str, numbers: range) -> None:
    from a2pg.postgres import PostgresStore

    store = await PostgresStore.open(dsn)
    try:
        for n in numbers:
            await store.append("w1", [NewEvent("ping", n, targets=(Target("echo"),))])
    finally:
        await store.close()


@pytest.mark.parametrize("listen", [[], ["--no-listen"]], ids=["notify", "polling"])
def test_worker_processes_events_and_stops_on_sigterm(postgres_dsn: str, listen: list[str]) -> None:
    asyncio.run(_append(postgres_dsn, range(2)))  # waiting before the worker starts
    proc = subprocess.Popen(
        [
            str(A2PG),
            "worker",
            "tests.cli.sample_app:app",
            "--dsn",
            postgres_dsn,
            "--poll-interval",
            "0.2",
            "--log-level",
            "warning",
            *listen,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        asyncio.run(_append(postgres_dsn, range(2, 5)))  # arriving while it runs
        deadline = time.monotonic() + 30
        while asyncio.run(_echoes(postgres_dsn)) < 5:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the worker did not process the events"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
