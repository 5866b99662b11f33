"""Small pure pieces of bench and progress output."""

from __future__ import annotations

import io

import pytest

from a2pg.bench.run import Series, percentile
from a2pg.demo.progress import ProgressBar


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([7.0], 99) == 7.0


def test_series_reports_the_median_of_its_runs() -> None:
    series = Series("drain", "events/s", [10.0, 30.0, 20.0])
    assert series.median == 20.0
    assert Series("empty", "ms").median == 0.0


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
