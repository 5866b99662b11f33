"""The knobs of ``a2pg demo``; the CLI derives its options, defaults and help from them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class DemoConfig:
    """Sized to finish in well under a minute on 2 cores, embedded PostgreSQL included."""

    sessions: int = field(default=200, metadata={"help": "chat sessions"})
    turns: int = field(default=4, metadata={"help": "user turns per session"})
    workers: int = field(default=4, metadata={"help": "worker processes"})
    concurrency: int = field(default=16, metadata={"help": "handlers per worker process"})
    timeout: float = field(default=120.0, metadata={"help": "give up after this many seconds"})

    @property
    def units(self) -> int:
        """Work owed: moderate and audit every turn, reply to all but the poison, audit replies."""
        users = self.sessions * self.turns
        return 4 * users - 2
