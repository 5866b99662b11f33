"""The knobs of ``a2pg bench``; the CLI derives its options, defaults and help from them."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field

APPEND_TASKS = 4
"""Concurrent appenders of the append phase: its connection count, so its ceiling's N."""


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """Sized so a full ``a2pg bench`` takes under ~10 minutes on 2 cores.

    A bad knob raises ``ValueError`` naming it (the CLI reports it as a usage error).
    """

    runs: int = field(
        default=3, metadata={"help": "runs, each measuring the ceiling and then every phase"}
    )
    ceiling_seconds: float = field(
        default=3.0, metadata={"help": "seconds each measurement of the commit ceiling lasts"}
    )
    processes: str = field(
        default="1,2,4", metadata={"help": "worker process counts P the drain is measured with"}
    )
    pool_size: int = field(
        default=10,
        metadata={
            "help": "connections in each worker process's store pool; "
            "P processes are compared with the ceiling on P x this"
        },
    )
    events: int = field(default=25_000, metadata={"help": "backlog events of each drain"})
    sessions: int = field(
        default=256, metadata={"help": "sessions a backlog (drain, chain, history) spreads over"}
    )
    concurrency: int = field(default=64, metadata={"help": "handlers per worker process"})
    chain_inputs: int = field(
        default=5_000,
        metadata={"help": "chain inputs, each completing with one event for a lane consumer"},
    )
    appends: int = field(default=1_000, metadata={"help": "single-event appends per run"})
    batches: int = field(default=50, metadata={"help": "batched appends per run"})
    batch_size: int = field(default=100, metadata={"help": "events per batched append"})
    latency_samples: int = field(
        default=50, metadata={"help": "wake latency samples per run and mode"}
    )
    poll_interval: float = field(
        default=0.2, metadata={"help": "worker poll interval of the polling-only latency run"}
    )
    history: int = field(
        default=1_000_000,
        metadata={"help": "completed events already in the store for the big history drain"},
    )
    history_base: int = field(
        default=10_000,
        metadata={"help": "completed events already in the store for the small history drain"},
    )
    history_events: int = field(
        default=5_000, metadata={"help": "backlog events of each history drain"}
    )
    memory_events: int = field(
        default=5_000,
        metadata={"help": "backlog events of the drain whose worker's peak RSS is measured"},
    )
    memory_concurrency: int = field(
        default=64, metadata={"help": "handlers of that one worker process"}
    )

    def __post_init__(self) -> None:
        for name, kind in typing.get_type_hints(BenchConfig).items():
            value = getattr(self, name)
            if kind is str:
                continue
            if isinstance(value, bool) or not isinstance(value, kind | int) or not value > 0:
                raise ValueError(f"{name} must be a positive {kind.__name__}, got {value!r}")
        object.__setattr__(self, "processes", ",".join(map(str, parse_counts(self.processes))))

    @property
    def process_counts(self) -> tuple[int, ...]:
        """The drain's P values, ascending and distinct."""
        return parse_counts(self.processes)

    @property
    def most_processes(self) -> int:
        """P of the chain and history drains: the largest of ``processes``."""
        return self.process_counts[-1]


def parse_counts(text: object) -> tuple[int, ...]:
    """``"1,2,4"`` as ``(1, 2, 4)``: positive whole numbers, sorted, each once."""
    if not isinstance(text, str):
        raise ValueError(f"processes must be a comma-separated list such as 1,2,4, got {text!r}")
    counts: set[int] = set()
    for part in text.split(","):
        try:
            count = int(part.strip())
        except ValueError:
            raise ValueError(
                f"processes must be a comma-separated list of whole numbers such as 1,2,4, "
                f"got {text!r}"
            ) from None
        if count < 1:
            raise ValueError(f"processes must all be at least 1, got {text!r}")
        counts.add(count)
    return tuple(sorted(counts))
