"""The knobs of ``a2pg bench``; the CLI derives its options, defaults and help from them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """Sized for a few minutes on 2 cores; raise ``events`` on bigger machines."""

    workers: int = field(default=4, metadata={"help": "worker processes draining the backlog"})
    runs: int = field(default=3, metadata={"help": "repeats of each measurement"})
    events: int = field(default=5_000, metadata={"help": "events drained end to end per run"})
    sessions: int = field(default=250, metadata={"help": "sessions those events spread over"})
    concurrency: int = field(default=32, metadata={"help": "handlers per worker process"})
    appends: int = field(default=1_000, metadata={"help": "single-event appends per run"})
    batches: int = field(default=50, metadata={"help": "batched appends per run"})
    batch_size: int = field(default=100, metadata={"help": "events per batched append"})
    latency_samples: int = field(
        default=50, metadata={"help": "wake latency samples per run and mode"}
    )
    poll_interval: float = field(
        default=0.2, metadata={"help": "worker poll interval of the polling-only latency run"}
    )
