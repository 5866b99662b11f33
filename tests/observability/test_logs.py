"""Worker logs: JSON lines with stable keys, one DEBUG line per claim, completion, failure and
release, the stats once at exit, and what ``a2pg worker --json`` means."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from a2pg import Head, NewEvent, Target
from a2pg.observability.logs import JsonFormatter, configure_logging, formatter
from a2pg.store import Store
from a2pg.worker import App, Worker

from ..worker.helpers import bounded, work
from .conftest import Cli
from .process import WITHOUT_EXTRAS, WorkerProcess, eventually

KEYS = ("ts", "level", "logger", "msg")
ATTEMPT_KEYS = ("session", "consumer", "lane", "index", "attempt")


@pytest.fixture
def attempt_lines() -> Iterator[io.StringIO]:
    """The worker's attempt lines at DEBUG, as JSON, in a stream of the test's own."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("a2pg.worker.attempts")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(level)


def parse(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line]


async def test_one_debug_line_per_claim_completion_and_failure(
    store: Store, attempt_lines: io.StringIO
) -> None:
    async def handler(head: Head) -> None:
        if head.event.payload["n"] == 2:
            raise RuntimeError("two")

    await store.append("s", [work(1, lane="l"), work(2)])
    await bounded(Worker(store, App({"w": handler}), max_failures=1).run_until_idle())

    lines = parse(attempt_lines.getvalue())
    assert all(tuple(line)[:4] == KEYS for line in lines)
    by_index = {
        index: [
            (line["msg"].split(" ")[0], line.get("outcome"))
            for line in lines
            if line["index"] == index
        ]
        for index in (1, 2)
    }
    assert by_index == {
        1: [("claimed", None), ("completed", "completed")],
        2: [("claimed", None), ("failed", "dead_lettered")],
    }
    first_claim, first_end = (line for line in lines if line["index"] == 1)
    assert {k: first_claim[k] for k in ATTEMPT_KEYS} == {
        "session": "s",
        "consumer": "w",
        "lane": "l",
        "index": 1,
        "attempt": 1,
    }
    assert "duration" not in first_claim
    assert first_end["duration"] >= 0
    assert first_end["level"] == "DEBUG" and first_end["logger"] == "a2pg.worker.attempts"
    assert first_end["msg"].startswith("completed s:w/l@1#1 in ")


async def test_nothing_is_logged_per_attempt_above_debug(
    store: Store, attempt_lines: io.StringIO
) -> None:
    logging.getLogger("a2pg.worker.attempts").setLevel(logging.INFO)
    await store.append("s", [work(1)])
    await bounded(Worker(store, App({"w": lambda head: None})).run_until_idle())
    assert attempt_lines.getvalue() == ""


def test_a_json_line_has_stable_keys_and_carries_the_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("x").makeRecord(
            "x", logging.ERROR, __file__, 1, "failed %s", ("here",), sys.exc_info()
        )
    line = json.loads(JsonFormatter().format(record))
    assert list(line) == [*KEYS, "exc"]
    assert line["msg"] == "failed here" and line["level"] == "ERROR"
    assert line["ts"].endswith("Z") and len(line["ts"]) == len("2026-01-01T00:00:00.000Z")
    assert "ValueError: boom" in line["exc"]
    assert "\n" not in JsonFormatter().format(record)


def test_an_unknown_log_format_is_refused() -> None:
    with pytest.raises(ValueError, match="text, json"):
        formatter("xml")  # type: ignore[arg-type]
    configure_logging("info", "text", io.StringIO())  # logging is configured already: a no-op


# ------------------------------------------------------------------- a real process


async def test_worker_json_logs_without_the_extras(
    postgres_dsn: str, postgres_store: Store
) -> None:
    """``--json`` means ``--log-format json``; the worker runs without prometheus-client and
    opentelemetry; at DEBUG each claim, completion, failure and release is one line, and
    the stats come once at exit."""
    store = postgres_store
    argv = (
        "worker",
        "tests.observability.sample_app:app",
        "--dsn",
        postgres_dsn,
        "--json",
        "--log-level",
        "debug",
        "--retry-base",
        "0.02",
        "--retry-cap",
        "0.02",
        "--shutdown-grace",
        "0.1",
    )
    with WorkerProcess(*argv, blocked=WITHOUT_EXTRAS) as worker:
        await worker.wait_for(r"worker \S+ serving echo")  # signal handlers are in place
        kinds = [None, "flaky", "slow"]
        await store.append(
            "j", [NewEvent("ping", {"kind": k}, targets=[Target("echo")]) for k in kinds]
        )

        async def two_done_and_the_slow_one_running() -> bool:
            echoed = sum(1 for e in await store.read("j") if e.type == "echoed")
            return echoed == 2 and worker.find(r'"msg": "claimed j:echo@3#1"') is not None

        await eventually(two_done_and_the_slow_one_running)
        assert await worker.stop() == 0, worker.err

    lines = parse(worker.err)
    assert all(tuple(line)[:4] == KEYS for line in lines)
    attempts = [line for line in lines if line["logger"] == "a2pg.worker.attempts"]
    events = sorted(
        (line["index"], line["attempt"], line["msg"].split(" ")[0], line.get("outcome"))
        for line in attempts
    )
    assert events == [
        (1, 1, "claimed", None),
        (1, 1, "completed", "completed"),
        (2, 1, "claimed", None),
        (2, 1, "failed", "failed"),
        (2, 2, "claimed", None),
        (2, 2, "completed", "completed"),
        (3, 1, "claimed", None),
        (3, 1, "released", "released"),
    ]
    assert all(line["session"] == "j" and line["consumer"] == "echo" for line in attempts)
    stopped = [line for line in lines if "stopped: " in line["msg"]]
    assert len(stopped) == 1, stopped
    assert "completed=2" in stopped[0]["msg"] and "released=1" in stopped[0]["msg"]


def test_worker_json_contradicting_the_log_format_is_a_usage_error(cli: Cli) -> None:
    code, err = cli(
        "worker", "x:app", "--dsn", "postgresql://h/d", "--json", "--log-format", "text"
    )
    assert code == 2
    assert err == "a2pg: error: --json means --log-format json, not --log-format text\n"


async def test_text_logs_say_the_stats_once(postgres_dsn: str) -> None:
    argv = ("worker", "tests.observability.sample_app:app", "--dsn", postgres_dsn)
    with WorkerProcess(*argv) as worker:
        await worker.wait_for(r"worker \S+ serving echo")  # signal handlers are in place
        assert await worker.stop() == 0, worker.err
    assert sum("stopped: " in line for line in worker.lines) == 1, worker.err
    assert worker.find(r"^\d{4}-\d\d-\d\d .* INFO a2pg.worker: worker \S+ stopped: WorkerStats")
