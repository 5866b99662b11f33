"""The knobs of ``a2pg demo``; the CLI derives its options and defaults from them."""

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
