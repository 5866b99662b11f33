"""The knobs of ``a2pg bench --versus``, and the job shape both systems get, fixed on purpose.

The knobs size the run (the CLI derives ``--rounds``, ``--vs-events`` and the others
from the fields); the constants below are the comparison itself, the same for a2pg
and for the other system, so they are not options.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field

SYSTEMS = ("pgqueuer",)
"""What ``--versus`` accepts."""

PRODUCERS = 4
"""Concurrent producers of the append figures."""
BATCH = 100
"""Jobs per enqueue call of ``append_batch``."""
MIXED_BATCH = 10
"""Jobs per enqueue call of the producer of ``mixed``."""
WORKERS = 4
"""Workers (a2pg ``Worker`` / pgqueuer ``QueueManager``) in this one process, drain and mixed."""
CONCURRENCY = 10
"""Handlers per a2pg worker; pgqueuer's batch size (its in-flight cap is 2x: its floor)."""
SESSIONS = 256
"""a2pg sessions the jobs spread over (pgqueuer has one queue)."""
WAKE_RATE = 50.0
"""Appends per second of the wake latency producer: one at a time, the worker idle between."""
WORKER_POOL = 20
"""Connections of the workers' side, per system: a2pg's one store pool (min = max); for
pgqueuer, one asyncpg pool of ``WORKER_POOL // WORKERS`` per QueueManager."""
PRODUCER_POOL = PRODUCERS
"""Connections of the producers' side, per system."""


@dataclass(frozen=True, slots=True)
class VersusConfig:
    """Sized so a full ``a2pg bench --versus pgqueuer`` takes a few minutes on 2 cores.

    A bad knob raises ``ValueError`` naming it (the CLI reports it as a usage error).
    """

    rounds: int = field(
        default=3, metadata={"help": "interleaved rounds: a2pg, then the other system, per round"}
    )
    vs_events: int = field(default=25_000, metadata={"help": "backlog jobs of each drain"})
    vs_appends: int = field(default=2_000, metadata={"help": "jobs enqueued one per call"})
    vs_batches: int = field(default=100, metadata={"help": f"enqueue calls of {BATCH} jobs"})
    mixed_seconds: float = field(
        default=10.0, metadata={"help": "seconds of the mixed window (append while draining)"}
    )
    wake_samples: int = field(
        default=200, metadata={"help": f"wake latency samples, at ~{WAKE_RATE:g} appends/s"}
    )

    def __post_init__(self) -> None:
        for name, kind in typing.get_type_hints(VersusConfig).items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, kind | int) or not value > 0:
                raise ValueError(f"{name} must be a positive {kind.__name__}, got {value!r}")
