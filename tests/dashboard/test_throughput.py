"""Throughput from the growth of the workers' cumulative ``completed`` counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from a2pg import WorkerBeat, WorkerInfo
from a2pg.dashboard.throughput import Throughput

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def worker(holder: str, completed: int, *, started: float = 0.0, seen: float) -> WorkerInfo:
    beat = WorkerBeat(
        holder=holder,
        host="h",
        pid=1,
        consumers=("c",),
        concurrency=4,
        started_at=T0 + timedelta(seconds=started),
        in_flight=0,
        version="x",
        interval=5.0,
        completed=completed,
    )
    return WorkerInfo(beat, T0 + timedelta(seconds=seen), 0.0)


def test_rates_sum_each_workers_growth() -> None:
    t = Throughput(window=600)
    t.observe([worker("a", 100, seen=0)], at=0)  # what came before is not counted
    assert t.rate(60, now=0).per_second is None  # nothing to compare with yet
    t.observe([worker("a", 160, seen=10)], at=10)
    t.observe([worker("a", 220, seen=20), worker("b", 30, started=15, seen=20)], at=20)
    # a: +60, +60; b started after the last sample: its 30 count.
    assert t.rate(60, now=20).per_second == (60 + 60 + 30) / 20
    t.observe([worker("a", 10, started=25, seen=30), worker("b", 40, started=15, seen=30)], at=30)
    # a restarted (its count went down): its 10 count; b: +10.
    assert [s.completed for s in t.samples] == [60, 90, 20]


def test_a_worker_seen_late_but_started_long_ago_counts_nothing_at_first() -> None:
    t = Throughput()
    t.observe([worker("a", 0, seen=0)], at=0)
    t.observe([worker("a", 5, seen=10), worker("old", 1000, started=-100, seen=10)], at=10)
    assert [s.completed for s in t.samples] == [5]


def test_samples_older_than_the_window_are_dropped_and_buckets_cover_it() -> None:
    t = Throughput(window=120)
    t.observe([worker("a", 0, seen=0)], at=0)
    for n in range(1, 31):
        t.observe([worker("a", n * 10, seen=n * 10)], at=n * 10)
    assert all(s.at >= 300 - 120 for s in t.samples)
    buckets = t.buckets(now=300, size=30)
    assert len(buckets) == 4
    assert buckets == [1.0, 1.0, 1.0, 1.0]  # 10 completions every 10 s
    assert t.rate(60, now=300).per_second == 1.0
