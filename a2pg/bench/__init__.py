"""``a2pg bench``: drain, append and wake-latency measurements on worker processes."""

from __future__ import annotations

from .config import BenchConfig
from .run import BenchFailed, run_bench

__all__ = ["BenchConfig", "BenchFailed", "run_bench"]
