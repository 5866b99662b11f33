"""``a2pg worker MODULE:APP``: loads the app, works until SIGTERM, exits 0; bad specs exit 2."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path

import pytest

from a2pg.models import NewEvent, Target

from .conftest import A2PG, Cli, run_script

ROOT = Path(__file__).resolve().parents[2]
SOMEWHERE = "postgresql://postgres@127.0.0.1:1/nothing"
"""A well-formed DSN nothing listens on: a bad target fails before anything connects."""


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "expected MODULE:APP (like myproject.jobs:app), got 'no_colon'"),
        (":app", "expected MODULE:APP"),
        ("tests.cli.sample_app:", "expected MODULE:APP"),
        ("tests.cli.nowhere:app", "cannot import module 'tests.cli.nowhere'"),
        (
            "tests.cli.sample_app:missing",
            "module 'tests.cli.sample_app' has no attribute 'missing'",
        ),
        (
            "tests.cli.sample_app:not_an_app",
            "tests.cli.sample_app:not_an_app is a int, not an a2pg App",
        ),
        ("json:loads", "json:loads is a function, not an a2pg App"),
        ("json:JSONDecodeError", "json:JSONDecodeError is a type, not an a2pg App"),
        (
            "tests.cli.sample_app:not_a_factory",
            "tests.cli.sample_app:not_a_factory() returned a dict, not an a2pg App",
        ),
        (
            "tests.cli.sample_app:failing_factory",
            "calling tests.cli.sample_app:failing_factory() failed: "
            "RuntimeError: JOBS_CONFIG is not set (at ",
        ),
        (
            "tests.cli.broken_import:app",
            "importing module 'tests.cli.broken_import' failed: "
            "RuntimeError: DATABASE_URL is not set (at ",
        ),
        (
            "tests.cli.missing_dependency:app",
            "importing module 'tests.cli.missing_dependency' failed: ModuleNotFoundError: "
            "No module named 'a2pg_no_such_dependency' (at ",
        ),
        ("tests.cli.sample_app:empty_app", "tests.cli.sample_app:empty_app has no consumers"),
        ("a2pg.worker:App", "a2pg.worker:App has no consumers"),
    ],
)
def test_bad_app_specs_exit_2(cli: Cli, postgres_dsn: str, spec: str, message: str) -> None:
    """One line naming what is wrong, no traceback, before anything touches the database."""
    result = cli("worker", spec, "--dsn", postgres_dsn)
    assert result.code == 2
    assert result.err.startswith(f"a2pg: error: {message}"), result.err
    assert result.err.count("\n") == 1, result.err
    assert result.out == ""


def test_a_bad_app_spec_from_the_script_is_one_line() -> None:
    result = run_script("worker", "json:loads", "--dsn", SOMEWHERE)
    assert result.code == 2
    assert result.err == "a2pg: error: json:loads is a function, not an a2pg App\n"


def test_load_app_accepts_a_factory() -> None:
    from a2pg.cli.app_target import load_app

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
