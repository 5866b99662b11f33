"""The arithmetic of ``a2pg bench --versus``, no I/O: per-round values, same-round ratios, targets.

A ratio is a2pg's value over the other system's in the same round (each round runs
both back to back, so a slow moment of the machine slows both); the figure's ratio
is the median of those per-round ratios, with their spread. The ratio of the two
medians is kept beside it, for reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .stats import Summary
from .versus_config import BATCH, MIXED_BATCH, PRODUCERS, WORKERS

A2PG = "a2pg"


@dataclass(frozen=True, slots=True)
class Target:
    """A figure's target: the median same-round ratio a2pg / other against ``threshold``."""

    op: Literal[">=", "<="]
    threshold: float

    def met(self, ratio: float | None) -> bool | None:
        if ratio is None:
            return None
        return ratio >= self.threshold if self.op == ">=" else ratio <= self.threshold

    def text(self) -> str:
        return f"{self.op} {self.threshold:.1f}x"


@dataclass(frozen=True, slots=True)
class Spec:
    """What a figure is: its name, unit, which way is better, and its target."""

    key: str
    name: str
    unit: str
    target: Target

    @property
    def lower_is_better(self) -> bool:
        return self.unit == "ms"


FASTER = Target(">=", 1.0)
AS_FAST = Target("<=", 1.0)
"""A latency target: a2pg's no higher than the other's (lower is better)."""

SPECS = (
    Spec("append_single", f"append, single jobs ({PRODUCERS} producers)", "jobs/s", FASTER),
    Spec("append_batch", f"append, batches of {BATCH} ({PRODUCERS} producers)", "jobs/s", FASTER),
    Spec("drain", f"drain a backlog ({WORKERS} workers)", "jobs/s", Target(">=", 1.5)),
    Spec("mixed", f"append x{MIXED_BATCH} while {WORKERS} workers drain", "jobs/s", FASTER),
    Spec("wake_p50", "wake latency, idle worker, p50", "ms", AS_FAST),
    Spec("wake_p99", "wake latency, idle worker, p99", "ms", AS_FAST),
)
"""The figures of a versus run, in report order, with the targets a2pg is held to."""


def ratio(value: float | None, other: float | None) -> float | None:
    """a2pg's value over the other's; None when either is missing or the other is 0."""
    if value is None or other is None or other <= 0:
        return None
    return value / other


@dataclass(slots=True)
class Figure:
    """One figure's values, round by round, for a2pg and for the other system."""

    spec: Spec
    other: str
    runs: dict[str, list[float]] = field(default_factory=dict)

    def add(self, system: str, value: float) -> None:
        self.runs.setdefault(system, []).append(value)

    def values(self, system: str) -> list[float]:
        return self.runs.get(system, [])

    def ratios(self) -> list[float | None]:
        """Per round: a2pg / other (rounds where both were measured)."""
        pairs = zip(self.values(A2PG), self.values(self.other), strict=False)
        return [ratio(a, b) for a, b in pairs]

    def ratio_summary(self) -> Summary:
        found = self.ratios()
        if not found or None in found:
            return Summary(None, None, None)
        return Summary.of([r for r in found if r is not None])

    def as_json(self) -> dict[str, Any]:
        spread = self.ratio_summary()
        medians = {s: Summary.of(self.values(s)).median for s in (A2PG, self.other)}
        target = self.spec.target
        return {
            "name": self.spec.name,
            "unit": self.spec.unit,
            "better": "lower" if self.spec.lower_is_better else "higher",
            **{system: _system_json(self.values(system)) for system in (A2PG, self.other)},
            "ratio": {
                "of": f"{A2PG} / {self.other}, per round",
                "runs": self.ratios(),
                "median": spread.median,
                "min": spread.min,
                "max": spread.max,
                "of_medians": ratio(medians[A2PG], medians[self.other]),
            },
            "target": {
                "op": target.op,
                "threshold": target.threshold,
                "text": target.text(),
                "met": target.met(spread.median),
            },
        }


def _system_json(values: list[float]) -> dict[str, Any]:
    summary = Summary.of(values)
    return {
        "runs": list(values),
        "median": summary.median,
        "min": summary.min,
        "max": summary.max,
    }


class Figures:
    """Every figure of a versus run, filled round by round."""

    def __init__(self, other: str) -> None:
        self.other = other
        self.figures = {spec.key: Figure(spec, other) for spec in SPECS}

    def add(self, key: str, system: str, value: float) -> None:
        self.figures[key].add(system, value)

    def as_json(self) -> dict[str, dict[str, Any]]:
        return {key: figure.as_json() for key, figure in self.figures.items()}
