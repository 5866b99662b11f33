"""``a2pg pause`` and ``a2pg resume``: the commands, and a real ``a2pg worker`` process that
stops running a paused consumer's handler and runs it again within seconds of a resume."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from a2pg.models import NewEvent, Target
from a2pg.postgres import PostgresStore
from a2pg.sqlite import SqliteStore

from .conftest import A2PG, Cli, run_script
from .stores import with_store

ROOT = Path(__file__).resolve().parents[2]
PING = NewEvent("ping", None, targets=(Target("echo"),))


async def _claimable(store: PostgresStore | SqliteStore) -> list[str]:
    """The consumers whose heads a claim takes now (handed back at once)."""
    heads = await store.claim_any(holder="tester", ttl=30, limit=50)
    for head in heads:
        await store.release_claims(head.session_id, holder="tester", claims=[head.attempt_ref])
    return sorted({head.consumer for head in heads})


@pytest.fixture
def dsn(postgres_dsn: str) -> str:
    async def seed(store: PostgresStore) -> None:
        events = [PING, NewEvent("mail", None, targets=(Target("mailer"),))]
        await store.append("s1", events)

    with_store(postgres_dsn, seed)
    return postgres_dsn


def test_pause_then_resume(cli: Cli, dsn: str) -> None:
    paused = cli("pause", "echo", "--dsn", dsn)
    assert paused.code == 0, paused
    assert paused.out == (
        "paused echo: claims skip its heads until `a2pg resume echo`; "
        "attempts already running finish\n"
    )
    assert with_store(dsn, _claimable) == ["mailer"]
    resumed = cli("resume", "echo", "--dsn", dsn)
    assert resumed.code == 0, resumed
    assert resumed.out == "resumed echo: its ready heads are claimable again\n"
    assert with_store(dsn, _claimable) == ["echo", "mailer"]


def test_several_names_json(cli: Cli, dsn: str) -> None:
    paused = cli("pause", "echo", "mailer", "echo", "--json", "--dsn", dsn)
    assert paused.code == 0, paused
    assert json.loads(paused.out) == {"paused": ["echo", "mailer"], "unknown": []}
    assert with_store(dsn, _claimable) == []
    resumed = cli("resume", "mailer", "echo", "--json", "--dsn", dsn)
    assert json.loads(resumed.out) == {"resumed": ["mailer", "echo"], "unknown": []}
    assert with_store(dsn, _claimable) == ["echo", "mailer"]


def test_an_unknown_name_is_paused_with_a_note(cli: Cli, dsn: str) -> None:
    result = cli("pause", "echo", "ecoh", "--dsn", dsn)
    assert result.code == 0, result
    assert result.out.splitlines()[-1] == (
        "note: no consumer 'ecoh' is registered, has work in a session or is served by a "
        "live worker (check the spelling)"
    )
    resumed = cli("resume", "ecoh", "echo", "--json", "--dsn", dsn)
    assert json.loads(resumed.out) == {"resumed": ["ecoh", "echo"], "unknown": ["ecoh"]}


def test_resuming_what_is_not_paused_succeeds_and_changes_nothing(cli: Cli, dsn: str) -> None:
    result = cli("resume", "echo", "--dsn", dsn)
    assert result.code == 0, result
    assert with_store(dsn, _claimable) == ["echo", "mailer"]


@pytest.mark.parametrize("command", ["pause", "resume"])
@pytest.mark.parametrize("name", ["", "a\ud800b", "x" * 257], ids=["empty", "surrogate", "long"])
def test_a_bad_name_exits_2_and_pauses_nothing(cli: Cli, dsn: str, command: str, name: str) -> None:
    if command == "resume":
        assert cli("pause", "echo", "--dsn", dsn).code == 0
    result = cli(command, "echo", name, "--dsn", dsn)
    assert result.code == 2, result
    assert result.err.startswith("a2pg: error: "), result.err
    assert result.err.count("\n") == 1
    assert result.out == ""
    expected = ["echo", "mailer"] if command == "pause" else ["mailer"]
    assert with_store(dsn, _claimable) == expected


@pytest.mark.parametrize("command", ["pause", "resume"])
def test_no_name_is_a_usage_error(cli: Cli, command: str) -> None:
    result = cli(command, "--dsn", "postgresql://postgres@127.0.0.1:1/nothing")
    assert result.code == 2
    assert "NAME" in result.err


def test_an_unreachable_database_exits_3() -> None:
    result = run_script("pause", "echo", "--dsn", "postgresql://postgres@127.0.0.1:1/nothing")
    assert result.code == 3, result
    assert result.err.startswith("a2pg: error: ")


def test_pause_and_resume_on_a_sqlite_file(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "a2.db"
    assert cli("migrate", "--sqlite", str(path)).code == 0

    async def seed() -> None:
        store = await SqliteStore.open(path)
        try:
            await store.append("s1", [PING])
        finally:
            await store.close()

    async def claimable() -> list[str]:
        store = await SqliteStore.open(path)
        try:
            return await _claimable(store)
        finally:
            await store.close()

    asyncio.run(seed())
    assert cli("pause", "echo", "--sqlite", str(path)).code == 0
    assert asyncio.run(claimable()) == []
    assert cli("resume", "echo", "--sqlite", str(path)).code == 0
    assert asyncio.run(claimable()) == ["echo"]


# -- a real worker process ------------------------------------------------------------------


async def _echoes(dsn: str) -> int:
    async def count(store: PostgresStore) -> int:
        return sum(1 for e in await store.read("w1") if e.type == "echoed")

    store = await PostgresStore.open(dsn)
    try:
        return await count(store)
    finally:
        await store.close()


async def _ping(dsn: str, count: int) -> None:
    store = await PostgresStore.open(dsn)
    try:
        for _ in range(count):
            await store.append("w1", [PING])
    finally:
        await store.close()


def _echoed(dsn: str, count: int, *, within: float, proc: subprocess.Popen[str]) -> float:
    """Waits until ``count`` pings are echoed; the seconds it took."""
    start = time.monotonic()
    while asyncio.run(_echoes(dsn)) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - start < within, f"not {count} echoes within {within}s"
        time.sleep(0.1)
    return time.monotonic() - start


def test_a_worker_runs_no_handler_while_paused_and_resumes_within_seconds(
    postgres_dsn: str,
) -> None:
    """The worker polls every 30 s: its claims see the pause at once, and the resume
    wakes it (a wakeup, not its poll)."""
    proc = subprocess.Popen(
        [
            str(A2PG),
            "worker",
            "tests.cli.sample_app:app",
            "--dsn",
            postgres_dsn,
            "--poll-interval",
            "30",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        asyncio.run(_ping(postgres_dsn, 1))
        _echoed(postgres_dsn, 1, within=30, proc=proc)  # the worker serves echo
        paused = run_script("pause", "echo", "--dsn", postgres_dsn)  # another process
        assert paused.code == 0, paused
        asyncio.run(_ping(postgres_dsn, 3))  # each append wakes the worker: it claims nothing
        time.sleep(2.0)
        assert asyncio.run(_echoes(postgres_dsn)) == 1
        resumed = run_script("resume", "echo", "--dsn", postgres_dsn)
        assert resumed.code == 0, resumed
        took = _echoed(postgres_dsn, 4, within=10, proc=proc)
        assert took < 10
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
