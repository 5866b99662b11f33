"""The knobs of ``a2pg demo`` and ``a2pg bench``: a dataclass each, defaults shown by --help."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DemoConfig:
    """Sized to finish in well under a minute on 2 cores, embedded PostgreSQL included."""

    sessions: int = 200
    turns: int = 4
    workers: int = 4
    concurrency: int = 16
    timeout: float = 120.0

    @property
    def units(self) -> int:
        """Work owed: moderate and audit every turn, reply to all but the poison, audit replies."""
        users = self.sessions * self.turns
        return 4 * users - 2


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
