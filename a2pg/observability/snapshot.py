"""What the store says about its consumers and workers at one moment, as numbers.

Read with two store calls (``consumer_stats``, ``workers``) that stay cheap on large
stores; shown as Prometheus gauges by ``collector`` and as JSON by ``a2pg metrics --json``.
This module needs no optional dependency.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..models import ConsumerStats, WorkerInfo
from ..store import Store

CONSUMER_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("ready", "a2pg_consumer_ready", "Heads claimable now"),
    (
        "oldest_ready_age",
        "a2pg_consumer_oldest_ready_age_seconds",
        "Lag: seconds since the longest-waiting ready head became claimable (0 when none)",
    ),
    ("claimed", "a2pg_consumer_claimed", "Heads under a live lease"),
    ("backing_off", "a2pg_consumer_backing_off", "Failed heads waiting for their retry time"),
    ("dead_letters", "a2pg_consumer_dead_letters", "Dead-lettered heads"),
    (
        "blocked_lanes",
        "a2pg_consumer_blocked_lanes",
        "Lane and log cursors stopped at a dead-lettered head",
    ),
    ("blocked", "a2pg_consumer_blocked_events", "Events queued behind dead-lettered heads"),
    ("registered", "a2pg_consumer_registered", "1 when the consumer registry holds it"),
)
"""Each ``ConsumerStats`` field shown, its gauge's name and help."""


@dataclass(frozen=True, slots=True)
class StoreSnapshot:
    consumers: tuple[ConsumerStats, ...]
    workers: tuple[WorkerInfo, ...]
    seconds: float
    """How long reading it took."""

    @property
    def live_workers(self) -> int:
        return sum(1 for worker in self.workers if not worker.stale)

    @property
    def stale_workers(self) -> int:
        return sum(1 for worker in self.workers if worker.stale)


async def read_snapshot(store: Store) -> StoreSnapshot:
    started = time.perf_counter()
    consumers = await store.consumer_stats()
    workers = await store.workers()
    return StoreSnapshot(tuple(consumers), tuple(workers), time.perf_counter() - started)


def gauge_value(stats: ConsumerStats, field: str) -> float:
    """A ``ConsumerStats`` field as a gauge's value (no lag is 0, registered is 1 or 0)."""
    value = getattr(stats, field)
    if value is None:
        return 0.0
    return float(value)


def snapshot_json(snapshot: StoreSnapshot) -> dict[str, Any]:
    """The same numbers as the gauges, for ``a2pg metrics --json``."""
    return {
        "consumers": [
            {
                "consumer": stats.consumer,
                "ready": stats.ready,
                "oldest_ready_age": stats.oldest_ready_age,
                "claimed": stats.claimed,
                "backing_off": stats.backing_off,
                "dead_letters": stats.dead_letters,
                "blocked_lanes": stats.blocked_lanes,
                "blocked": stats.blocked,
                "registered": stats.registered,
            }
            for stats in snapshot.consumers
        ],
        "workers": {"live": snapshot.live_workers, "stale": snapshot.stale_workers},
        "seconds": round(snapshot.seconds, 6),
    }
