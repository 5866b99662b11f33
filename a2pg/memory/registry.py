"""The registry of log consumers in memory: who a write wakes when it names no consumers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from datetime import datetime

from ..models import BackfillProgress, Consumer


class Registry:
    """Registered log consumers by name, the consumers an operator paused (targeted or
    log, registered or not) and each backfilling log consumer's progress."""

    def __init__(self) -> None:
        self._consumers: dict[str, Consumer] = {}
        self.paused: dict[str, datetime] = {}
        """Paused consumer names, with when they were paused."""
        self.backfills: dict[str, BackfillProgress] = {}
        """Backfill progress of registered log consumers with ``backfill``."""

    def wake_set(self, consumers: Sequence[Consumer] | None) -> Sequence[Consumer]:
        """The log consumers a write wakes: those it names, else the registered ones."""
        return list(self._consumers.values()) if consumers is None else consumers

    def register(self, consumers: Sequence[Consumer]) -> None:
        """Stores each spec. A changed spec reaches the consumer's existing log cursors
        lazily, as ``refreshLogTypes`` does in the seeds (and PostgreSQL here): at their
        session's next write that wakes the registered consumers (one naming none)."""
        for consumer in consumers:
            self._consumers[consumer.name] = consumer

    def unregister(self, names: Iterable[str]) -> None:
        """Stops waking these consumers; their cursors stay."""
        for name in names:
            self._consumers.pop(name, None)

    def listed(self) -> list[Consumer]:
        return [self._consumers[name] for name in sorted(self._consumers)]
