"""``a2pg worker MODULE:APP``: loads the app, works until SIGTERM, exits 0; bad specs exit 2."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from a2pg.cli.common import EXIT_HANDLERS_RUNNING
from a2pg.models import NewEvent, Target

from ..worker import isolated_app
from . import stubborn_app
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


async def _append_to(dsn: str, events: list[NewEvent]) -> None:
    from a2pg.postgres import PostgresStore

    store = await PostgresStore.open(dsn)
    try:
        await store.append("w1", events)
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


def test_a_bad_attempt_timeout_exits_2(cli: Cli) -> None:
    result = cli(
        "worker", "tests.cli.sample_app:app", "--dsn", SOMEWHERE, "--attempt-timeout", "inf"
    )
    assert result.code == 2
    assert result.err.startswith("a2pg: error: attempt_timeout must be above 0"), result.err
    result = cli("worker", "tests.cli.sample_app:app", "--dsn", SOMEWHERE, "--attempt-timeout", "0")
    assert result.code == 2 and "--attempt-timeout: must be greater than 0" in result.err


@dataclass(frozen=True)
class Mark:
    """A line of the stubborn handler's marks file."""

    at: float
    pid: int
    attempt: int
    failures: int
    what: str


def read_marks(path: Path) -> list[Mark]:
    if not path.exists():
        return []
    marks = []
    for line in path.read_text().splitlines():
        at, pid, attempt, failures, what = line.split()
        marks.append(Mark(float(at), int(pid), int(attempt), int(failures), what))
    return marks


async def _stubborn_results(dsn: str) -> list[dict[str, int]]:
    from a2pg.postgres import PostgresStore

    store = await PostgresStore.open(dsn)
    try:
        return [e.payload for e in await store.read("w1") if e.type == stubborn_app.RESULT]
    finally:
        await store.close()


async def _live_workers(dsn: str) -> int:
    from a2pg.postgres import PostgresStore

    store = await PostgresStore.open(dsn)
    try:
        return len(await store.workers())
    finally:
        await store.close()


GRACE = 1.0
TTL = 2.0
EXIT_MARGIN = 6.0
"""Seconds past the grace a worker may take to stop, close its store and exit."""


def _stubborn_worker(dsn: str, marks: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        stubborn_app.MARKS_ENV: str(marks),
        stubborn_app.SLEEP_ENV: "60",  # far past the test: only os._exit ends it in time
    }
    return subprocess.Popen(
        [
            str(A2PG),
            "worker",
            "tests.cli.stubborn_app:app",
            *("--dsn", dsn, "--shutdown-grace", str(GRACE), "--ttl", str(TTL)),
            *("--poll-interval", "0.2", "--heartbeat-interval", "0.5", "--log-level", "info"),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(check: object, what: str, *, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_sigterm_with_a_sync_handler_running_exits_6_and_never_releases_its_claim(
    postgres_dsn: str, tmp_path: Path
) -> None:
    """The issue's case: the handler's thread ignores SIGTERM. The process exits within
    the grace and a margin (not when the thread would return), with exit code 6; the
    head is never released meanwhile, so the other worker starts it only after the
    first process has exited and its lease has lapsed (one failure counted, as after a
    crash), and then completes it."""
    marks = tmp_path / "marks"
    asyncio.run(
        _append_to(postgres_dsn, [NewEvent("go", targets=(Target(stubborn_app.CONSUMER),))])
    )
    first = _stubborn_worker(postgres_dsn, marks)
    second: subprocess.Popen[str] | None = None
    try:
        _wait_for(
            lambda: any(m.pid == first.pid for m in read_marks(marks)),
            "the first worker never started the handler",
        )
        second = _stubborn_worker(postgres_dsn, marks)
        _wait_for(  # claiming, with the head held by the first
            lambda: asyncio.run(_live_workers(postgres_dsn)) == 2,
            "the second worker never came up",
        )
        first.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        _out, err = first.communicate(timeout=GRACE + EXIT_MARGIN)
        took, exited_at = time.monotonic() - signalled, time.time()
        assert first.returncode == EXIT_HANDLERS_RUNNING, err
        assert took >= GRACE, err  # the grace was given
        assert "still runs in its thread; its claim is kept, not released" in err
        assert "exiting with code 6 without waiting for 1 sync handlers still running" in err
        assert "released for another worker" not in err
        assert "Traceback" not in err
        _wait_for(
            lambda: [m.what for m in read_marks(marks) if m.pid == second.pid] == ["start", "end"],
            "the second worker never ran the head after the lease lapsed",
        )
        [first_start] = [m for m in read_marks(marks) if m.pid == first.pid]
        [again, _end] = [m for m in read_marks(marks) if m.pid == second.pid]
        assert (first_start.attempt, first_start.what) == (1, "start")
        assert again.at > exited_at, "the head ran again before the first worker exited"
        assert (again.attempt, again.failures) == (2, 1)  # the lease lapsed: not released
        _wait_for(
            lambda: (
                asyncio.run(_stubborn_results(postgres_dsn)) == [{"attempt": 2, "pid": second.pid}]
            ),
            "the second worker's result never arrived",
        )
        second.send_signal(signal.SIGTERM)
        _out, err = second.communicate(timeout=30)
        assert second.returncode == 0, err
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


# -- --consumers: one process per subset ---------------------------------------------------

ISOLATED = "tests.worker.isolated_app:app"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("nope", "consumer 'nope' is not one of the app's consumers: replies, backfill, audit"),
        ("replies,replies", "consumer 'replies' is named twice in consumers"),
        ("replies, audit ,Replies", "consumer 'Replies' is not one of the app's consumers"),
        ("", "argument --consumers: must be consumer names, comma-separated"),
        ("replies,", "argument --consumers: must be consumer names, comma-separated"),
        (" , ", "argument --consumers: must be consumer names, comma-separated"),
    ],
)
def test_bad_consumers_exit_2_before_connecting(cli: Cli, given: str, message: str) -> None:
    """Nothing listens at SOMEWHERE and ``--wait 0`` would exit 3 at once: a 2 with this
    line says the names were refused before the worker tried the database."""
    result = cli("worker", ISOLATED, "--dsn", SOMEWHERE, "--wait", "0", "--consumers", given)
    assert result.code == 2, result.err
    assert message in result.err, result.err
    assert "Traceback" not in result.err and result.out == ""


def test_the_consumers_option_is_in_the_help(cli: Cli) -> None:
    result = cli("worker", "--help")
    assert result.code == 0
    assert "--consumers NAMES" in result.out and "serve only these of the app's" in result.out


def _subset_worker(dsn: str, consumers: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            str(A2PG),
            "worker",
            ISOLATED,
            *("--dsn", dsn, "--consumers", consumers, "--concurrency", "4"),
            *("--poll-interval", "0.2", "--heartbeat-interval", "0.5", "--log-level", "warning"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def _beats(dsn: str) -> dict[int, tuple[str, ...]]:
    from a2pg.postgres import PostgresStore

    store = await PostgresStore.open(dsn)
    try:
        return {info.beat.pid: info.beat.consumers for info in await store.workers()}
    finally:
        await store.close()


async def _handled_by(dsn: str) -> list[tuple[str, int]]:
    from a2pg.postgres import PostgresStore

    store = await PostgresStore.open(dsn)
    try:
        return [
            (e.payload["consumer"], e.payload["by"])
            for e in await store.read("iso")
            if e.type == isolated_app.HANDLED
        ]
    finally:
        await store.close()


async def _registered(dsn: str) -> list[str]:
    from a2pg.postgres import PostgresStore

    store = await PostgresStore.open(dsn)
    try:
        return [c.name for c in await store.registered_consumers()]
    finally:
        await store.close()


def test_two_processes_each_serve_only_their_consumers(postgres_dsn: str) -> None:
    """One process per subset, on one database: each claims only its consumers' heads,
    registers only its log consumers and beats with only their names."""
    interactive = _subset_worker(postgres_dsn, "replies")
    started = [interactive]
    try:
        _wait_for(
            lambda: asyncio.run(_beats(postgres_dsn)) == {interactive.pid: ("replies",)},
            "the replies worker never came up",
        )
        assert asyncio.run(_registered(postgres_dsn)) == []  # it serves no log consumer
        bulk = _subset_worker(postgres_dsn, "backfill,audit")
        started.append(bulk)
        _wait_for(
            lambda: len(asyncio.run(_beats(postgres_dsn))) == 2,
            "the bulk worker never came up",
        )
        assert asyncio.run(_beats(postgres_dsn)) == {
            interactive.pid: ("replies",),
            bulk.pid: ("backfill", "audit"),
        }
        assert asyncio.run(_registered(postgres_dsn)) == ["audit"]
        events = [
            *(NewEvent("ask", {"n": n}, targets=(Target("replies"),)) for n in range(8)),
            *(NewEvent("import", {"n": n}, targets=(Target("backfill"),)) for n in range(8)),
            *(NewEvent(isolated_app.ORDER, {"n": n}) for n in range(3)),
        ]
        asyncio.run(_append_to_session(postgres_dsn, "iso", events))
        _wait_for(
            lambda: len(asyncio.run(_handled_by(postgres_dsn))) == 19,
            "the two workers did not handle every event",
        )
        handled = Counter(asyncio.run(_handled_by(postgres_dsn)))
        assert handled == Counter(
            {("replies", interactive.pid): 8, ("backfill", bulk.pid): 8, ("audit", bulk.pid): 3}
        )
        for proc in started:
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err
            assert "Traceback" not in err
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


async def _append_to_session(dsn: str, session_id: str, events: list[NewEvent]) -> None:
    from a2pg.postgres import PostgresStore

    store = await PostgresStore.open(dsn)
    try:
        await store.append(session_id, events)
    finally:
        await store.close()
