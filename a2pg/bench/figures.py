"""What every ``a2pg bench`` collects run by run, on PostgreSQL and on SQLite alike."""

from __future__ import annotations

import dataclasses
from typing import Any

from . import phases
from .config import BenchConfig
from .phases import Check
from .stats import Figure, best_of


class FigureSet:
    """A bench's figures and checks, and the report's figure order: ceilings, drains by
    P, the best drain, then the rest as declared."""

    def __init__(self, c: BenchConfig, figures: list[Figure]) -> None:
        self.c = c
        self.figures = {f.key: f for f in figures}
        self.checks: list[Check] = []
        self.loads: list[list[float] | None] = []
        """The load average as each run began: other work on the machine depresses figures."""

    def add(self, key: str, value: float, ceilings: dict[int, float]) -> None:
        figure = self.figures[key]
        figure.add(value, None if figure.connections is None else ceilings[figure.connections])

    def drained(self, key: str, result: phases.Drained, ceilings: dict[int, float]) -> None:
        self.add(key, result.rate, ceilings)
        self.checks.extend(result.checks)

    def figures_json(self) -> dict[str, dict[str, Any]]:
        drains = [self.figures[f"drain_p{p}"] for p in self.c.process_counts]
        chosen = best_of(drains)
        best = chosen.renamed(
            "drain_best", f"drain, best P (P={chosen.key.removeprefix('drain_p')})"
        )
        figures = {**self.figures, best.key: best}
        ordered = [k for k in figures if k.startswith(("ceiling_", "drain_p"))] + [best.key]
        ordered += [k for k in figures if k not in ordered]
        return {key: figures[key].as_json() for key in ordered}

    def report_with(self, data: dict[str, dict[str, Any]], targets: list[Any]) -> dict[str, Any]:
        return {
            "ok": all(check.ok for check in self.checks),
            "figures": data,
            "targets": targets,
            "checks": [dataclasses.asdict(check) for check in self.checks],
        }
