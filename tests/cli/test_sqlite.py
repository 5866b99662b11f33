"""``--sqlite PATH`` in place of ``--dsn``: migrate, check, listings, redrive, tail, demo.

(``a2pg worker --sqlite`` runs as real processes in ``tests/sqlite/test_processes.py``.)
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from a2pg import NewEvent, Target
from a2pg.sqlite import SqliteStore
from a2pg.sqlite.layout import HEAD_REVISION

from .conftest import Cli, run_script


def test_check_names_migrate_until_the_file_is_migrated(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "a2.db"
    missing = cli("check", "--sqlite", str(path))
    assert missing.code == 4
    assert f"a2pg migrate --sqlite {path}" in missing.err
    assert not path.exists()
    migrated = cli("migrate", "--sqlite", str(path))
    assert migrated.code == 0, migrated.err
    assert "migrated: " in migrated.out and f"revision {HEAD_REVISION} (current)" in migrated.out
    again = cli("migrate", "--json", "--sqlite", str(path))
    report = json.loads(again.out)
    assert report["before"]["current"] and report["after"]["path"] == str(path)
    assert cli("check", "--sqlite", str(path)).code == 0


def test_commands_before_migrate_exit_4_and_write_nothing(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "a2.db"
    commands = (
        ("sessions",),
        ("cursors", "s"),
        ("dead-letters",),
        ("tail", "s"),
        ("worker", "tests.cli.sample_app:app"),
    )
    for argv in commands:
        result = cli(*argv, "--sqlite", str(path))
        assert result.code == 4, (argv, result)
        assert "a2pg migrate --sqlite" in result.err
    assert not path.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("sessions", "--sqlite"), "--sqlite needs a PATH for `a2pg sessions`"),
        (("migrate", "--sqlite", "x.db", "--dsn", "postgresql://h/d"), "not both"),
        (("check", "--sqlite", " "), "--sqlite PATH must name a file"),
        (("migrate", "--sql", "--sqlite", "x.db"), "not with --sqlite"),
    ],
)
def test_usage_errors(cli: Cli, argv: tuple[str, ...], message: str) -> None:
    result = cli(*argv)
    assert result.code == 2
    assert message in result.err
    assert result.err.count("\n") == 1 and result.err.startswith("a2pg: error: ")


def test_a_file_that_is_not_a_database(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database " * 200)
    result = cli("migrate", "--sqlite", str(path))
    assert result.code == 4
    assert "not a SQLite database" in result.err
    assert path.read_text() == "not a database " * 200


def test_a_folder_cannot_be_opened(cli: Cli, tmp_path: Path) -> None:
    result = cli("sessions", "--sqlite", str(tmp_path))
    assert result.code == 3
    assert "cannot open the SQLite database" in result.err


async def _poisoned(path: Path) -> None:
    """A session whose one event failed until dead-lettered."""
    store = await SqliteStore.open(path, migrate=True)
    try:
        await store.append("chat", [NewEvent("turn", {"n": 1}, targets=[Target("reply", "l")])])
        (head,) = await store.claim_any(holder="w", ttl=30)
        await store.fail_attempt(
            "chat", consumer="reply", lane="l", index=1, attempt=1, error="boom", max_failures=1
        )
        assert head.index == 1
    finally:
        await store.close()


def test_listings_and_redrive_on_a_file(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "a2.db"
    asyncio.run(_poisoned(path))
    where = ("--sqlite", str(path))
    sessions = json.loads(cli("sessions", "--json", *where).out)
    assert [(s["session_id"], s["dead_letters"]) for s in sessions] == [("chat", 1)]
    cursors = cli("cursors", "chat", *where)
    assert cursors.code == 0 and "BLOCKED" in cursors.out
    dead = cli("dead-letters", *where)
    assert dead.code == 0 and "boom" in dead.out
    assert cli("redrive", "chat", "reply", "1", "--skip", *where).code == 0
    assert cli("dead-letters", "chat", "--json", *where).out.strip() == "[]"
    tail = cli("tail", "chat", "--no-follow", *where)
    assert tail.code == 0 and "turn" in tail.out


def test_metrics_of_a_file(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "a2.db"
    asyncio.run(_poisoned(path))
    result = cli("metrics", "--once", "--json", "--sqlite", str(path))
    assert result.code == 0, result.err
    (reply,) = json.loads(result.out)["consumers"]
    assert (reply["consumer"], reply["dead_letters"], reply["blocked_lanes"]) == ("reply", 1, 1)


@pytest.mark.slow
def test_demo_on_a_temporary_file_verifies_and_exits_0() -> None:
    result = run_script("demo", "--sqlite", "--sessions", "20", "--turns", "3", timeout=120)
    assert result.code == 0, result.out + result.err
    for check in ("exactly once", "order", "poison skipped by redrive", "workers stopped"):
        assert f"ok   {check}" in result.out
    assert "(a temporary file, SQLite " in result.out
    assert "on 4 worker processes" in result.out


SQLITE_TINY = {
    "runs": 1,
    "ceiling-seconds": 0.2,
    "processes": "1,2",
    "events": 60,
    "sessions": 10,
    "concurrency": 8,
    "chain-inputs": 20,
    "appends": 10,
    "batches": 2,
    "batch-size": 5,
    "latency-samples": 3,
    "poll-interval": 0.05,
}
"""Sizes that take seconds; figures from them mean nothing and no test asserts one."""


@pytest.mark.slow
def test_bench_on_a_file_reports_drain_append_and_wake_latency(tmp_path: Path) -> None:
    path = tmp_path / "bench.db"
    options = [part for name, value in SQLITE_TINY.items() for part in (f"--{name}", str(value))]
    result = run_script("bench", "--json", "--sqlite", str(path), *options, timeout=240)
    assert result.code == 0, result.out + result.err
    data = json.loads(result.out)
    assert data["ok"] is True, data["checks"]
    assert data["machine"]["sqlite"] and data["targets"] == []
    figures = data["figures"]
    assert {"ceiling_1", "ceiling_2", "drain_p1", "drain_p2", "drain_best", "chain"} <= set(figures)
    assert {"append_single", "append_batch", "wake_change_p50", "wake_poll_p99"} <= set(figures)
    assert figures["drain_p2"]["ratio"]["median"] is not None  # compared with the ceiling
    assert data["checks"] and all(check["ok"] for check in data["checks"])
    assert not path.with_name("bench-ceiling.db").exists()  # the scratch file is gone
