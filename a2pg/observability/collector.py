"""The store's view as Prometheus gauges, per consumer: backlog, lag, leases, dead letters.

``SnapshotCollector`` shows one ``StoreSnapshot`` (``a2pg metrics --once``);
``StoreCollector`` reads the store when scraped, at most every ``max_age`` seconds, from
the scraping thread onto the store's event loop (``a2pg worker --metrics-store``,
``a2pg metrics --port``). Importing this module without ``prometheus-client`` raises
``MissingExtra``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator

from ..store import Store
from .extras import MissingExtra
from .snapshot import CONSUMER_GAUGES, StoreSnapshot, gauge_value, read_snapshot

try:
    from prometheus_client.core import GaugeMetricFamily, Metric
    from prometheus_client.registry import Collector
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    raise MissingExtra("metrics", "a2pg metrics") from exc

log = logging.getLogger("a2pg.metrics")

DEFAULT_MAX_AGE = 5.0
"""Seconds a scraped store snapshot is served again before the store is read anew."""

READ_TIMEOUT = 10.0
"""Seconds a scrape waits for the store; past it the scrape says ``a2pg_store_up 0``."""


def families(snapshot: StoreSnapshot | None) -> Iterator[Metric]:
    """The gauges of ``snapshot``; None (the store could not be read) is ``a2pg_store_up 0``."""
    yield GaugeMetricFamily(
        "a2pg_store_up", "1 when the store answered the last read", value=int(snapshot is not None)
    )
    if snapshot is None:
        return
    for field, name, help_text in CONSUMER_GAUGES:
        gauge = GaugeMetricFamily(name, help_text, labels=["consumer"])
        for stats in snapshot.consumers:
            gauge.add_metric([stats.consumer], gauge_value(stats, field))
        yield gauge
    workers = GaugeMetricFamily(
        "a2pg_workers", "Workers by heartbeat: live, or stale (missed three)", labels=["state"]
    )
    workers.add_metric(["live"], snapshot.live_workers)
    workers.add_metric(["stale"], snapshot.stale_workers)
    yield workers
    yield GaugeMetricFamily(
        "a2pg_store_read_seconds", "Seconds the store took to say all this", value=snapshot.seconds
    )


NOTHING = StoreSnapshot((), (), 0.0)


class SnapshotCollector(Collector):
    """Collects one snapshot, taken before."""

    def __init__(self, snapshot: StoreSnapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        return families(self.snapshot)


class StoreCollector(Collector):
    """Reads ``store`` (running on ``loop``) when scraped from another thread, at most every
    ``max_age`` seconds; concurrent scrapes share one read."""

    def __init__(
        self,
        store: Store,
        loop: asyncio.AbstractEventLoop,
        *,
        max_age: float = DEFAULT_MAX_AGE,
        timeout: float = READ_TIMEOUT,
    ) -> None:
        self._store = store
        self._loop = loop
        self._max_age = max_age
        self._timeout = timeout
        self._lock = threading.Lock()
        self._snapshot: StoreSnapshot | None = None
        self._read_at = float("-inf")
        self.reads = 0

    def describe(self) -> Iterator[Metric]:
        """The gauges' names, without reading the store (a registry asks when registering)."""
        return families(NOTHING)

    def collect(self) -> Iterator[Metric]:
        return families(self._fresh())

    def _fresh(self) -> StoreSnapshot | None:
        if _running_loop() is self._loop:  # waiting here would block the very loop it needs
            log.error("the store's gauges are collected from other threads only")
            return None
        with self._lock:
            if time.monotonic() - self._read_at < self._max_age:
                return self._snapshot
            self._read_at = time.monotonic()
            self.reads += 1
            future = asyncio.run_coroutine_threadsafe(read_snapshot(self._store), self._loop)
            try:
                self._snapshot = future.result(self._timeout)
            except Exception as error:
                future.cancel()
                self._snapshot = None
                log.warning("reading the store's stats for /metrics failed: %r", error)
            return self._snapshot


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
