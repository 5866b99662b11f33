"""``a2pg demo`` and ``a2pg bench`` end to end on a fresh database (small sizes)."""

from __future__ import annotations

import io
import json

import pytest

from a2pg.cli.bench import print_table

from .conftest import run_script


@pytest.mark.slow
def test_demo_on_a_fresh_database_verifies_and_exits_0(postgres_dsn: str) -> None:
    result = run_script(
        "demo",
        "--dsn",
        postgres_dsn,
        "--sessions",
        "30",
        "--turns",
        "4",
        "--workers",
        "2",
        timeout=120,
    )
    assert result.code == 0, result.out + result.err
    for check in (
        "exactly once",
        "order",
        "transient failures retried",
        "poison dead-lettered",
        "poison skipped by redrive",
        "workers stopped cleanly",
    ):
        assert f"ok   {check}:" in result.out
    assert "completions/s" in result.out


@pytest.mark.slow
def test_demo_json(postgres_dsn: str) -> None:
    result = run_script(
        "demo",
        "--json",
        "--dsn",
        postgres_dsn,
        "--sessions",
        "10",
        "--turns",
        "3",
        "--workers",
        "2",
        timeout=120,
    )
    assert result.code == 0, result.out + result.err
    data = json.loads(result.out)
    assert data["ok"] is True
    assert data["units"] == 4 * 10 * 3 - 2
    assert all(check["ok"] for check in data["checks"])


TINY = {
    "runs": 2,
    "ceiling-seconds": 0.3,
    "processes": "1,2",
    "pool-size": 2,
    "events": 150,
    "sessions": 20,
    "concurrency": 8,
    "chain-inputs": 40,
    "appends": 20,
    "batches": 4,
    "batch-size": 10,
    "latency-samples": 4,
    "poll-interval": 0.05,
    "history": 500,
    "history-base": 100,
    "history-events": 60,
    "memory-events": 50,
    "memory-concurrency": 16,
}
"""Sizes that take seconds; figures from them mean nothing and no test asserts one."""

FIGURES = {
    "ceiling_2",
    "ceiling_4",
    "drain_p1",
    "drain_p2",
    "drain_best",
    "chain",
    "append_single",
    "append_batch",
    "wake_notify_p50",
    "wake_notify_p99",
    "wake_poll_p50",
    "wake_poll_p99",
    "wake_delayed_p50",
    "wake_delayed_p99",
    "history_base",
    "history_full",
    "history_ratio",
    "memory_drain",
    "worker_rss",
}


def test_bench_json_with_tiny_sizes(postgres_dsn: str) -> None:
    options = [part for name, value in TINY.items() for part in (f"--{name}", str(value))]
    result = run_script("bench", "--json", "--dsn", postgres_dsn, *options, timeout=240)
    assert result.code == 0, result.out + result.err
    data = json.loads(result.out)
    assert data["ok"] is True
    assert set(data["machine"]) >= {
        "cpu_cores",
        "postgres",
        "fsync",
        "synchronous_commit",
        "python",
        "date",
    }
    assert data["machine"]["fsync"] in ("on", "off")
    assert data["ceiling"]["connections"] == [2, 4]  # pool 2 x P in (1, 2); 4 append tasks
    figures = data["figures"]
    assert set(figures) == FIGURES
    for key, figure in figures.items():
        assert len(figure["runs"]) == 2, key
        assert figure["min"] <= figure["median"] <= figure["max"], key
        if figure["ceiling_connections"] is None:
            assert figure["ratio"] is None, key
        else:
            assert f"ceiling_{figure['ceiling_connections']}" in figures, key
            assert len(figure["ratio"]["runs"]) == 2, key
            assert figure["ratio"]["min"] <= figure["ratio"]["median"] <= figure["ratio"]["max"]
    assert figures["drain_p2"]["ceiling_connections"] == 4
    assert figures["append_single"]["ceiling_connections"] == 4
    assert {t["figure"]: t["text"] for t in data["targets"]} == {
        "drain_best": ">= 1x ceiling",
        "chain": ">= 0.5x ceiling",
        "append_single": ">= 0.7x ceiling",
        "append_batch": ">= 4x ceiling",
        "wake_notify_p50": "< 5 ms",
        "wake_notify_p99": "< 15 ms",
        "history_ratio": ">= 0.85x",
        "worker_rss": "< 120 MB",
    }
    assert all(isinstance(t["met"], bool) for t in data["targets"])
    checks = {check["name"]: check for check in data["checks"]}
    assert all(check["ok"] for check in checks.values())
    for run in (1, 2):
        for p in (1, 2):
            drained = checks[f"run {run} drain P={p}: the workers completed each unit once"]
            assert drained["detail"] == f"150 completions of 150 from {p}/{p} processes"
            headed = checks[f"run {run} drain P={p}: every backlog head completed"]
            assert headed["detail"].startswith("150 of 150")
        chained = checks[f"run {run} chain: every chained lane event appended and completed"]
        assert chained["detail"] == "40 of 40 completed; 80 events stored"
    assert checks["history 500: the store reads a loaded session"]["ok"]
    table = io.StringIO()
    print_table(table, data)  # the same report as people see it
    lines = table.getvalue().splitlines()
    assert lines[1].startswith("machine: ")
    header = next(line for line in lines if line.startswith("FIGURE"))
    assert header.split() == ["FIGURE", "MEDIAN", "SPREAD", "X", "CEILING", "TARGET", "MET"]
    assert "x (" in next(line for line in lines if line.startswith("drain, P=2 "))
    assert "targets met: " in lines[-1]
