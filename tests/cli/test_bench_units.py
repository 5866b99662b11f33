"""Small pure pieces of bench and progress output: statistics, ratios, targets, knobs, rows."""

from __future__ import annotations

import io
import math
from typing import Any

import pytest

from a2pg.bench.config import BenchConfig, parse_counts
from a2pg.bench.phases import Check, spread
from a2pg.bench.postgres_side import SHAPE as POSTGRES
from a2pg.bench.run import Bench
from a2pg.bench.sqlite_side import SHAPE as SQLITE
from a2pg.bench.stats import TARGETS, Figure, Goal, Summary, best_of, percentile, ratio
from a2pg.cli.bench import print_table, row
from a2pg.cli.common import EXIT_USAGE
from a2pg.demo.progress import ProgressBar

from .conftest import Cli


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([7.0], 99) == 7.0


def test_summary_is_the_median_and_the_range() -> None:
    assert Summary.of([10.0, 30.0, 20.0]) == Summary(20.0, 10.0, 30.0)
    assert Summary.of([1.0, 2.0, 3.0, 10.0]) == Summary(2.5, 1.0, 10.0)
    assert Summary.of([]) == Summary(None, None, None)


def test_ratio_to_the_ceiling() -> None:
    assert ratio(3_000.0, 2_000.0) == 1.5
    assert ratio(5.0, 0.0) is None  # no ceiling measured: no ratio, never inf


def test_a_figure_keeps_each_runs_ratio_to_that_runs_ceiling() -> None:
    figure = Figure("drain_p2", "drain, P=2", "events/s", connections=20)
    figure.add(1_000.0, 1_000.0)
    figure.add(1_500.0, 1_000.0)
    figure.add(900.0, 3_000.0)
    assert figure.summary == Summary(1_000.0, 900.0, 1_500.0)
    assert figure.ratios == [1.0, 1.5, 0.3]
    assert figure.ratio_summary == Summary(1.0, 0.3, 1.5)


def test_the_ratio_of_runs_is_not_the_ratio_of_medians() -> None:
    """Interleaving is the point: a slow run is compared with its own (slow) ceiling."""
    figure = Figure("chain", "chain", "completions/s", connections=10)
    for value, ceiling in ((100.0, 100.0), (200.0, 200.0), (300.0, 1_000.0)):
        figure.add(value, ceiling)
    assert figure.ratio_summary.median == 1.0
    assert figure.summary.median == 200.0


def test_a_figure_without_a_ceiling_has_no_ratio() -> None:
    figure = Figure("wake_notify_p50", "wake", "ms")
    figure.add(3.0, 1_000.0)
    assert figure.ratios == []
    assert figure.ratio_summary == Summary(None, None, None)
    assert figure.as_json()["ratio"] is None


def test_a_run_without_a_ceiling_leaves_the_ratio_unknown() -> None:
    figure = Figure("drain_p1", "drain, P=1", "events/s", connections=10)
    figure.add(1_000.0, 0.0)
    figure.add(1_000.0, 500.0)
    assert figure.ratios == [None, 2.0]
    assert figure.ratio_summary.median is None


@pytest.mark.parametrize(
    ("goal", "runs", "ceiling", "met"),
    [
        (Goal("ratio", ">=", 1.0), [1_000.0], 1_000.0, True),
        (Goal("ratio", ">=", 1.0), [999.0], 1_000.0, False),
        (Goal("value", "<", 5.0), [4.99], 1.0, True),
        (Goal("value", "<", 5.0), [5.0], 1.0, False),
        (Goal("value", ">=", 0.85), [0.85], 1.0, True),
        (Goal("ratio", ">=", 0.5), [], 1.0, None),
    ],
)
def test_targets_are_judged_on_the_median(
    goal: Goal, runs: list[float], ceiling: float, met: bool | None
) -> None:
    figure = Figure("f", "f", "events/s", connections=10)
    for value in runs:
        figure.add(value, ceiling)
    assert goal.met(figure) is met


def test_targets_read_as_the_issue_states_them() -> None:
    assert {key: goal.text(unit) for key, goal, unit in _targets()} == {
        "drain_best": ">= 1x ceiling",
        "chain": ">= 0.5x ceiling",
        "append_single": ">= 0.7x ceiling",
        "append_batch": ">= 4x ceiling",
        "wake_notify_p50": "< 5 ms",
        "wake_notify_p99": "< 15 ms",
        "history_ratio": ">= 0.85x",
        "worker_rss": "< 120 MB",
    }


def _targets() -> list[tuple[str, Goal, str]]:
    units = {
        "wake_notify_p50": "ms",
        "wake_notify_p99": "ms",
        "worker_rss": "MB",
        "history_ratio": "x",
    }
    return [(key, goal, units.get(key, "events/s")) for key, goal in TARGETS.items()]


def test_the_json_of_a_figure_holds_runs_medians_spreads_ratio_and_target() -> None:
    figure = Figure("append_single", "append", "events/s", connections=4)
    figure.add(700.0, 1_000.0)
    figure.add(800.0, 1_000.0)
    data = figure.as_json()
    assert data["runs"] == [700.0, 800.0]
    assert (data["median"], data["min"], data["max"]) == (750.0, 700.0, 800.0)
    assert data["ceiling_connections"] == 4
    assert data["ratio"]["runs"] == [0.7, 0.8]
    assert math.isclose(data["ratio"]["median"], 0.75)
    assert data["target"]["text"] == ">= 0.7x ceiling"
    assert data["target"]["met"] is True


def test_best_of_picks_the_highest_median_ratio() -> None:
    one = Figure("drain_p1", "drain, P=1", "events/s", connections=10)
    two = Figure("drain_p2", "drain, P=2", "events/s", connections=20)
    one.add(1_000.0, 800.0)  # 1.25x
    two.add(1_500.0, 2_000.0)  # faster, but 0.75x of its own ceiling
    assert best_of([one, two]) is one
    best = best_of([one, two]).renamed("drain_best", "drain, best P (P=1)")
    assert (best.key, best.runs, best.ratios) == ("drain_best", [1_000.0], [1.25])
    assert best.goal == TARGETS["drain_best"]
    with pytest.raises(ValueError):
        best_of([])


def test_processes_parse_sorted_and_distinct() -> None:
    assert parse_counts("4, 1,2,2") == (1, 2, 4)
    assert BenchConfig(processes="4,1").process_counts == (1, 4)
    assert BenchConfig(processes="4,1").most_processes == 4
    assert BenchConfig(processes="4,1").processes == "1,4"


@pytest.mark.parametrize("text", ["", "1,x", "0", "1,-2", "2.5"])
def test_bad_processes_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="processes"):
        BenchConfig(processes=text)


@pytest.mark.parametrize(
    "knobs",
    [{"runs": 0}, {"events": -1}, {"ceiling_seconds": 0.0}, {"sessions": 2.5}, {"runs": True}],
)
def test_bad_knobs_are_refused(knobs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(knobs))):
        BenchConfig(**knobs)  # type: ignore[arg-type]


def test_bad_processes_on_the_command_line_are_a_usage_error(cli: Cli) -> None:
    result = cli("bench", "--processes", "1,two")
    assert result.code == EXIT_USAGE
    assert "processes" in result.err


@pytest.mark.parametrize(("total", "sessions"), [(25_000, 256), (10, 256), (7, 3), (1, 1)])
def test_a_backlog_spreads_exactly_over_the_sessions(total: int, sessions: int) -> None:
    sizes = spread(total, sessions)
    assert sum(sizes) == total
    assert len(sizes) == min(total, sessions)
    assert max(sizes) - min(sizes) <= 1


def test_a_table_row_shows_median_spread_ratio_target_and_verdict() -> None:
    figure = Figure("chain", "chain to a lane, P=4", "completions/s", connections=40)
    figure.add(1_234.4, 2_000.0)
    figure.add(2_000.0, 4_000.0)
    assert row(figure.as_json()) == {
        "figure": "chain to a lane, P=4",
        "median": "1,617 completions/s",
        "spread": "1,234-2,000",
        "x ceiling": "0.56x (0.50-0.62)",
        "target": ">= 0.5x ceiling",
        "met": "yes",
    }
    latency = Figure("wake_notify_p99", "wake latency, NOTIFY, p99", "ms")
    latency.add(16.04)
    shown = row(latency.as_json())
    assert (shown["median"], shown["x ceiling"], shown["met"]) == ("16.0 ms", "", "NO")


def test_each_phase_is_compared_with_the_ceiling_on_its_connection_count() -> None:
    bench = Bench(BenchConfig(processes="1,3", pool_size=5), POSTGRES)
    assert bench.ns == [4, 5, 15]  # 4 append tasks; P x pool for P in (1, 3)
    connections = {key: f.connections for key, f in bench.figures.items()}
    assert connections["drain_p1"] == 5
    assert connections["drain_p3"] == 15
    assert connections["chain"] == connections["history_full"] == 15
    assert connections["append_single"] == connections["append_batch"] == 4
    assert connections["memory_drain"] == 5
    assert connections["wake_notify_p50"] is connections["worker_rss"] is None


def test_on_sqlite_the_same_phases_compare_with_writer_processes_and_hold_no_target() -> None:
    bench = Bench(BenchConfig(runs=1, processes="1,3", pool_size=5), SQLITE)
    assert bench.ns == [1, 3]  # one writer per process; appends are one process
    connections = {key: f.connections for key, f in bench.figures.items()}
    assert connections["drain_p1"] == 1
    assert connections["drain_p3"] == connections["chain"] == 3
    assert connections["append_single"] == connections["append_batch"] == 1
    assert {"wake_change_p50", "wake_change_p99", "wake_poll_p99"} <= set(connections)
    assert not {"history_full", "memory_drain", "wake_notify_p50"} & set(connections)
    for key in bench.figures:
        bench.add(key, 1_000.0, {1: 1_000.0, 3: 1_000.0})
    data = bench.report()
    assert data["targets"] == []
    assert all(figure["target"] is None for figure in data["figures"].values())


def report(checks: list[Check]) -> dict[str, Any]:
    """A made-up report: P=3 is faster, but P=1 is nearer its ceiling."""
    bench = Bench(BenchConfig(runs=1, processes="1,3", pool_size=5), POSTGRES)
    ceilings = {4: 1_000.0, 5: 1_000.0, 15: 3_000.0}
    for key in bench.figures:
        bench.add(key, 1_200.0 if key == "drain_p1" else 2_000.0, ceilings)
    bench.checks.extend(checks)
    data = bench.report()
    machine = {"cpu_cores": 2, "postgres": "18.1", "fsync": "on", "synchronous_commit": "on"}
    machine |= {"server": "PostgreSQL 18.1, fsync on, synchronous_commit on"}
    machine |= {"python": "3.11.7", "date": "2026-12-01T00:00:00+00:00"}
    machine |= {"load_average_start": [0.5, 0.4, 0.3], "load_average_runs": [[0.7, 0.5, 0.3]]}
    ceiling = {"shape": "BEGIN; INSERT; UPDATE; COMMIT", "n": "P x 5"}
    return {**data, "database": "a test", "machine": machine, "config": {"runs": 1}} | {
        "ceiling": ceiling
    }


def test_the_report_leads_with_the_ceilings_and_the_best_drain() -> None:
    data = report([Check("drained", True, "1 of 1")])
    figures = data["figures"]
    assert list(figures)[:6] == [
        "ceiling_4",
        "ceiling_5",
        "ceiling_15",
        "drain_p1",
        "drain_p3",
        "drain_best",
    ]
    assert figures["drain_best"]["name"] == "drain, best P (P=1)"
    assert figures["drain_best"]["ratio"]["median"] == 1.2
    assert figures["drain_best"]["target"]["met"] is True
    assert data["ok"] is True
    assert [t["figure"] for t in data["targets"]] == list(TARGETS)


def test_the_table_shows_the_machine_every_figure_and_failed_checks() -> None:
    data = report([Check("drained", True, "1 of 1"), Check("chained", False, "3 of 4")])
    assert data["ok"] is False
    stream = io.StringIO()
    print_table(stream, data)
    lines = stream.getvalue().splitlines()
    assert lines[1].startswith("machine: 2 cores, PostgreSQL 18.1, fsync on,")
    assert lines[2] == (
        "load average (1 min): 0.50 at start, 0.70 as the runs began, unknown at end"
    )
    header = next(i for i, line in enumerate(lines) if line.startswith("FIGURE"))
    assert lines[header].split() == ["FIGURE", "MEDIAN", "SPREAD", "X", "CEILING", "TARGET", "MET"]
    shown = lines[header + 2 : header + 2 + len(data["figures"])]
    assert [line.split("  ")[0] for line in shown][:4] == [
        "commit ceiling, N=4",
        "commit ceiling, N=5",
        "commit ceiling, N=15",
        "drain, P=1",
    ]
    assert "1.20x (1.20-1.20)" in shown[3]
    assert lines[-2] == "targets met: 4 of 8"  # drain, chain, append single, history
    assert lines[-1] == "FAIL chained: 3 of 4"


def test_progress_bar_without_a_terminal_prints_whole_lines() -> None:
    stream = io.StringIO()
    bar = ProgressBar(200, stream, label="completions")
    bar.update(50)  # too soon for a plain line
    bar.say("verifying")
    bar.finish(200)
    lines = stream.getvalue().splitlines()
    assert lines[0].endswith("] verifying")
    assert lines[1].startswith("[" + "#" * 30 + "] 200/200 completions")
    assert "\r" not in stream.getvalue()


@pytest.mark.parametrize(("done", "filled"), [(0, 0), (100, 15), (250, 30)])
def test_progress_bar_fill(done: int, filled: int) -> None:
    line = ProgressBar(200, io.StringIO()).line(done)
    assert line.startswith("[" + "#" * filled + "." * (30 - filled) + "]")
