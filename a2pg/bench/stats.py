"""The bench's arithmetic, no I/O: medians and spreads of runs, ratios to the ceiling, targets."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ranked = sorted(values)
    rank = max(1, min(len(ranked), math.ceil(q / 100 * len(ranked))))
    return ranked[rank - 1]


@dataclass(frozen=True, slots=True)
class Summary:
    """The median of some runs and their spread (min to max); all None without runs."""

    median: float | None
    min: float | None
    max: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        if not values:
            return cls(None, None, None)
        return cls(statistics.median(values), min(values), max(values))


def ratio(value: float, ceiling: float) -> float | None:
    """``value`` as a multiple of ``ceiling``; None when there is no ceiling to divide by."""
    return value / ceiling if ceiling > 0 else None


@dataclass(frozen=True, slots=True)
class Goal:
    """A figure's target: its median (``on="value"``) or its median ratio to the ceiling
    (``on="ratio"``) compared with ``threshold``."""

    on: Literal["value", "ratio"]
    op: Literal[">=", "<"]
    threshold: float

    def met(self, figure: Figure) -> bool | None:
        """Whether the figure's median meets the target; None when it was not measured."""
        summary = figure.ratio_summary if self.on == "ratio" else figure.summary
        if summary.median is None:
            return None
        if self.op == ">=":
            return summary.median >= self.threshold
        return summary.median < self.threshold

    def text(self, unit: str) -> str:
        """``>= 1.0x ceiling``, ``< 5 ms``, ``>= 0.85x``."""
        if self.on == "ratio":
            return f"{self.op} {self.threshold:g}x ceiling"
        if unit == "x":
            return f"{self.op} {self.threshold:g}x"
        return f"{self.op} {self.threshold:g} {unit}"


TARGETS: dict[str, Goal] = {
    "drain_best": Goal("ratio", ">=", 1.0),
    "chain": Goal("ratio", ">=", 0.5),
    "append_single": Goal("ratio", ">=", 0.7),
    "append_batch": Goal("ratio", ">=", 4.0),
    "wake_notify_p50": Goal("value", "<", 5.0),
    "wake_notify_p99": Goal("value", "<", 15.0),
    "history_ratio": Goal("value", ">=", 0.85),
    "worker_rss": Goal("value", "<", 120.0),
}
"""The targets of the issue "Drain at the commit ceiling", by figure key."""


@dataclass(slots=True)
class Figure:
    """One measured figure: its value in each run and, when it is compared with the
    ceiling, its ratio to the same run's ceiling on ``connections`` connections."""

    key: str
    name: str
    unit: str
    connections: int | None = None
    runs: list[float] = field(default_factory=list)
    ratios: list[float | None] = field(default_factory=list)

    @property
    def summary(self) -> Summary:
        return Summary.of(self.runs)

    @property
    def ratio_summary(self) -> Summary:
        """Median and spread of the ratios; None when a run had no ceiling to divide by."""
        if self.connections is None or not self.ratios or None in self.ratios:
            return Summary(None, None, None)
        return Summary.of([r for r in self.ratios if r is not None])

    @property
    def goal(self) -> Goal | None:
        return TARGETS.get(self.key)

    def add(self, value: float, ceiling: float | None = None) -> None:
        """Records one run's value, and its ratio to ``ceiling`` for a compared figure."""
        self.runs.append(value)
        if self.connections is not None:
            self.ratios.append(None if ceiling is None else ratio(value, ceiling))

    def renamed(self, key: str, name: str) -> Figure:
        """A copy under another key and name (so under that key's target)."""
        return Figure(key, name, self.unit, self.connections, list(self.runs), list(self.ratios))

    def as_json(self) -> dict[str, Any]:
        summary = self.summary
        data: dict[str, Any] = {
            "name": self.name,
            "unit": self.unit,
            "runs": list(self.runs),
            "median": summary.median,
            "min": summary.min,
            "max": summary.max,
            "ceiling_connections": self.connections,
            "ratio": None,
            "target": None,
        }
        if self.connections is not None:
            spread = self.ratio_summary
            data["ratio"] = {
                "runs": list(self.ratios),
                "median": spread.median,
                "min": spread.min,
                "max": spread.max,
            }
        goal = self.goal
        if goal is not None:
            data["target"] = {
                "on": goal.on,
                "op": goal.op,
                "threshold": goal.threshold,
                "text": goal.text(self.unit),
                "met": goal.met(self),
            }
        return data


def best_of(figures: Sequence[Figure]) -> Figure:
    """The figure with the highest median ratio to its ceiling (the highest median where
    none has ratios)."""
    if not figures:
        raise ValueError("best_of needs at least one figure")

    def score(figure: Figure) -> float:
        median = figure.ratio_summary.median
        if median is None:
            median = figure.summary.median
        return -math.inf if median is None else median

    return max(figures, key=score)
