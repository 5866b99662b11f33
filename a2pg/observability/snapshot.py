"""What the store says about its consumers and workers at one moment, as numbers.

Read with two store calls (``consumer_stats``, ``workers``) that stay cheap on large
stores; shown as Prometheus gauges by ``collector`` and as JSON by ``a2pg metrics --json``.
This module needs no optional dependency.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..models import BackfillProgress, ConsumerStats, WorkerInfo
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
    (
        "scheduled",
        "a2pg_consumer_scheduled",
        "Heads waiting for their target's not_before, never failed",
    ),
    ("dead_letters", "a2pg_consumer_dead_letters", "Dead-lettered heads"),
    (
        "blocked_lanes",
        "a2pg_consumer_blocked_lanes",
        "Lane and log cursors stopped at a dead-lettered head",
    ),
    ("blocked", "a2pg_consumer_blocked_events", "Events queued behind dead-lettered heads"),
    (
        "oldest_blocked_age",
        "a2pg_consumer_oldest_blocked_age_seconds",
        "Blocked lag: seconds since the longest-blocked lane's head was dead-lettered "
        "(0 when none)",
    ),
    ("registered", "a2pg_consumer_registered", "1 when the consumer registry holds it"),
    ("paused", "a2pg_consumer_paused", "1 while an operator has it paused (claims skip it)"),
    ("served_by", "a2pg_consumer_live_workers", "Live workers whose heartbeat names it"),
    (
        "backfill_sessions",
        "a2pg_consumer_backfill_sessions",
        "Sessions its log backfill has given a cursor so far (0 when none)",
    ),
    (
        "backfill_running",
        "a2pg_consumer_backfill_running",
        "1 while its log backfill runs, 0 once done or when none",
    ),
)
"""Each ``ConsumerStats`` field shown (or figure of one: ``backfill_*``), its gauge's name
and help. Every consumer ``consumer_stats`` lists has every gauge, 0 when it has nothing
(an alert on ``a2pg_consumer_dead_letters > 0`` reads 0, not no data)."""

_FIGURES: dict[str, Callable[[ConsumerStats], float | int | bool | None]] = {
    "backfill_sessions": lambda s: None if s.backfill is None else s.backfill.sessions,
    "backfill_running": lambda s: s.backfill is not None and s.backfill.running,
}
"""Gauges that are not one field: what they read of ``ConsumerStats``."""


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
    """A ``ConsumerStats`` field (or ``_FIGURES`` figure) as a gauge's value (no lag is 0,
    registered is 1 or 0)."""
    figure = _FIGURES.get(field)
    value = figure(stats) if figure is not None else getattr(stats, field)
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
                "scheduled": stats.scheduled,
                "dead_letters": stats.dead_letters,
                "blocked_lanes": stats.blocked_lanes,
                "blocked": stats.blocked,
                "oldest_blocked_age": stats.oldest_blocked_age,
                "registered": stats.registered,
                "paused": stats.paused,
                "served_by": stats.served_by,
                "backfill": _backfill_json(stats.backfill),
            }
            for stats in snapshot.consumers
        ],
        "workers": {"live": snapshot.live_workers, "stale": snapshot.stale_workers},
        "seconds": round(snapshot.seconds, 6),
    }


def _backfill_json(progress: BackfillProgress | None) -> dict[str, Any] | None:
    if progress is None:
        return None
    return {
        "started_at": progress.started_at.isoformat(),
        "sessions": progress.sessions,
        "after": progress.after,
        "done_at": None if progress.done_at is None else progress.done_at.isoformat(),
        "running": progress.running,
    }
