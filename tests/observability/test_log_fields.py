"""Every worker log line about one head or attempt (failure, retry, timeout, dead letter)
carries the head's fields as JSON keys, not only inside ``msg``; the text stays readable."""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from a2pg import Head, NewEvent, Target
from a2pg.backoff import Backoff
from a2pg.ids import FakeClock
from a2pg.memory import MemoryStore
from a2pg.observability.logs import JsonFormatter, formatter
from a2pg.store import Store
from a2pg.worker import App, Worker

from ..worker.helpers import bounded
from .process import WorkerProcess, eventually

HEAD_KEYS = ("session_id", "consumer", "lane", "index", "attempt", "error")

EXACT = Backoff(base=10.0, cap=10.0, jitter=0.0)
"""Retries due 10 s after a failure, by the store's clock (moved by hand here)."""

QUICK = 0.05


class Captured:
    """What the worker's loggers wrote at WARNING and above, as JSON and as text."""

    def __init__(self) -> None:
        self.json = io.StringIO()
        self.text = io.StringIO()

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.json.getvalue().splitlines() if line]


@pytest.fixture
def captured() -> Iterator[Captured]:
    """The ``a2pg.worker`` logger (its ``attempts`` child too) at WARNING, through the
    formats of ``--log-format json`` and ``text``."""
    seen = Captured()
    handlers = [logging.StreamHandler(seen.json), logging.StreamHandler(seen.text)]
    handlers[0].setFormatter(JsonFormatter())
    handlers[1].setFormatter(formatter("text"))
    logger = logging.getLogger("a2pg.worker")
    level = logger.level
    logger.setLevel(logging.WARNING)
    for handler in handlers:
        logger.addHandler(handler)
    yield seen
    for handler in handlers:
        logger.removeHandler(handler)
    logger.setLevel(level)


def failing_app() -> App:
    """``crash`` (lane ``turns``) always raises; ``slow``'s sync handler outlives its timeout."""
    app = App()

    @app.consumer("crash")
    async def crash(head: Head) -> None:
        raise RuntimeError(f"model crashed on attempt {head.attempt}")

    @app.consumer("slow", timeout=QUICK)
    def slow(head: Head) -> None:
        time.sleep(QUICK * 4)  # a thread: the timeout warns, then fails it once it returns

    return app


async def test_failure_retry_timeout_and_dead_letter_lines_carry_the_head_fields(
    memory: Store, clock: FakeClock, captured: Captured
) -> None:
    await memory.append(
        "chat-7",
        [
            NewEvent("turn", {"n": 1}, targets=[Target("crash", "turns")]),
            NewEvent("job", {"n": 2}, targets=[Target("slow")]),
        ],
    )
    worker = Worker(memory, failing_app(), max_failures=2, backoff=EXACT, poll_interval=60.0)
    await bounded(worker.run_until_idle())  # attempt 1 of each fails: retried
    clock.advance(20.0)
    await bounded(worker.run_until_idle())  # attempt 2 of each fails: dead-lettered
    assert (worker.stats.failed, worker.stats.dead_lettered, worker.stats.timed_out) == (2, 2, 2)

    lines = [line for line in captured.lines() if line["level"] in ("WARNING", "ERROR")]
    about_heads = [line for line in lines if "session_id" in line]
    assert about_heads == [line for line in lines if "@" in line["msg"]], "a line without them"
    verbs = {"failed": "failed", "dead-lettered": "dead-lettered", "ran": "timeout"}
    verbs["still"] = "timeout"  # warned again while the thread runs on (timing decides)
    summary = {
        (
            line["consumer"],
            line["attempt"],
            line["level"],
            line.get("outcome"),
            verbs[line["msg"].split(" ")[1]],
        )
        for line in about_heads
    }
    assert summary == {
        ("crash", 1, "WARNING", "failed", "failed"),
        ("crash", 2, "ERROR", "dead_lettered", "dead-lettered"),
        ("slow", 1, "WARNING", "failed", "failed"),
        ("slow", 1, "WARNING", None, "timeout"),  # while its thread runs on
        ("slow", 2, "ERROR", "dead_lettered", "dead-lettered"),
        ("slow", 2, "WARNING", None, "timeout"),
    }
    ends = [line for line in about_heads if "outcome" in line]
    assert len(ends) == 4  # one line per failure
    for line in about_heads:
        assert line["session_id"] == line["session"] == "chat-7"
        assert list(line)[:4] == ["ts", "level", "logger", "msg"]
        assert [key for key in line if key in HEAD_KEYS] == list(HEAD_KEYS)
        expected = {"crash": ("turns", 1), "slow": (None, 2)}[line["consumer"]]
        assert (line["lane"], line["index"]) == expected
        assert isinstance(line["error"], str) and "\n" not in line["error"]
        where = f"chat-7:{line['consumer']}"
        assert line["msg"].startswith(where), line["msg"]  # the text says the same

    crash = [line for line in about_heads if line["consumer"] == "crash"]
    assert [line["error"] for line in crash] == [
        "RuntimeError: model crashed on attempt 1",
        "RuntimeError: model crashed on attempt 2",
    ]
    assert all("Traceback" in line["exc"] for line in crash)  # a dead letter's too
    timeouts = [line for line in about_heads if line["consumer"] == "slow"]
    assert all(line["error"].startswith("AttemptTimeout: ") for line in timeouts)
    assert {line["error"] for line in timeouts if "outcome" not in line} == {
        "AttemptTimeout: ran past its 0.05s timeout"
    }

    text = captured.text.getvalue()
    assert "ERROR a2pg.worker: chat-7:crash/turns@1#2 dead-lettered after 2 failures: " in text
    assert "session_id" not in text and "{" not in text.splitlines()[0]


async def test_a_head_the_claim_dead_letters_says_its_leases_lapsed(
    memory: MemoryStore, clock: FakeClock, captured: Captured
) -> None:
    await memory.append("s", [NewEvent("job", None, targets=[Target("crash")])])
    for holder in ("gone-1", "gone-2"):  # two workers died holding it
        (head,) = await memory.claim_any(holder=holder, ttl=1.0)
        clock.advance(2.0)
    worker = Worker(memory, failing_app(), max_failures=2)
    await bounded(worker.run_until_idle())
    assert worker.stats.dead_lettered == 1
    (line,) = captured.lines()
    assert line["level"] == "WARNING" and line["msg"] == "s:crash@1 dead-lettered (leases lapsed)"
    assert {key: line[key] for key in (*HEAD_KEYS, "outcome")} == {
        "session_id": "s",
        "consumer": "crash",
        "lane": None,
        "index": 1,
        "attempt": head.attempt + 1,
        "error": "leases lapsed",
        "outcome": "dead_lettered",
    }


async def test_a_real_worker_process_logs_failures_with_the_fields(
    postgres_dsn: str, postgres_store: Store
) -> None:
    """``a2pg worker --json``: a poison head's failure (WARNING) and dead letter (ERROR)."""
    argv = (
        "worker",
        "tests.observability.sample_app:app",
        "--dsn",
        postgres_dsn,
        "--json",
        "--max-failures",
        "2",
        "--retry-base",
        "0.02",
        "--retry-cap",
        "0.02",
    )
    with WorkerProcess(*argv) as worker:
        await worker.wait_for(r"worker \S+ serving echo")
        await postgres_store.append(
            "p", [NewEvent("ping", {"kind": "poison"}, targets=[Target("echo")])]
        )

        async def dead_lettered() -> bool:
            return bool(await postgres_store.dead_letters("p"))

        await eventually(dead_lettered)
        await worker.wait_for(r'"level": "ERROR"')
        assert await worker.stop() == 0, worker.err

    lines = [json.loads(line) for line in worker.lines]
    warnings = [line for line in lines if line["level"] in ("WARNING", "ERROR")]
    failures = [line for line in warnings if "p:echo" in line["msg"]]
    assert [line["msg"] for line in warnings if line not in failures] == ["SIGTERM: draining"]
    assert [(line["level"], line["attempt"], line.get("outcome")) for line in failures] == [
        ("WARNING", 1, "failed"),
        ("ERROR", 2, "dead_lettered"),
    ]
    for line in failures:
        fields = {key: line[key] for key in HEAD_KEYS}
        assert fields == {
            "session_id": "p",
            "consumer": "echo",
            "lane": None,
            "index": 1,
            "attempt": line["attempt"],
            "error": f"RuntimeError: poison on attempt {line['attempt']}",
        }
        assert "Traceback" in line["exc"]
