"""``a2pg demo`` and ``a2pg bench`` end to end on a fresh database (small sizes)."""

from __future__ import annotations

import json

import pytest

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


def test_bench_json_with_tiny_sizes(postgres_dsn: str) -> None:
    result = run_script(
        "bench",
        "--json",
        "--dsn",
        postgres_dsn,
        "--runs",
        "1",
        "--workers",
        "2",
        "--events",
        "200",
        "--sessions",
        "20",
        "--appends",
        "40",
        "--batches",
        "4",
        "--batch-size",
        "10",
        "--latency-samples",
        "5",
        "--poll-interval",
        "0.05",
        timeout=180,
    )
    assert result.code == 0, result.out + result.err
    data = json.loads(result.out)
    assert data["ok"] is True
    results = data["results"]
    assert set(results) == {
        "drain",
        "append_single",
        "append_batched",
        "wake_notify_p50",
        "wake_notify_p99",
        "wake_poll_p50",
        "wake_poll_p99",
    }
    for series in results.values():
        assert len(series["runs"]) == 1
        assert series["median"] >= 0
    assert results["drain"]["median"] > 0
    assert results["wake_poll_p99"]["median"] < 1000  # polls every 50 ms
