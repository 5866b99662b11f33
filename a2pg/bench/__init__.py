"""``a2pg bench``: a2pg's throughput, latency and memory beside the machine's commit ceiling."""

from __future__ import annotations

from .config import BenchConfig
from .errors import BenchFailed
from .run import run_bench

__all__ = ["BenchConfig", "BenchFailed", "run_bench"]
