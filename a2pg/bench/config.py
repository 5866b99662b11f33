"""The knobs of ``a2pg bench``; the CLI derives its options and defaults from them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """Sized for a few minutes on 2 cores; raise ``events`` on bigger machines."""

    workers: int = 4
    runs: int = 3
    events: int = 5_000
    sessions: int = 250
    concurrency: int = 32
    appends: int = 1_000
    batches: int = 50
    batch_size: int = 100
    latency_samples: int = 50
    poll_interval: float = 0.2
