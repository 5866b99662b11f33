"""The registry of log consumers in memory: who a write wakes when it names no consumers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from ..contract.rules import backfill_restarts
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

    def register(self, consumers: Sequence[Consumer], now: datetime) -> None:
        """Stores each spec. A changed spec reaches the consumer's existing log cursors
        lazily, as ``refreshLogTypes`` does in the seeds (and PostgreSQL here): at their
        session's next write that wakes the registered consumers (one naming none), or
        through its backfill, which a spec with ``backfill`` (re)starts at ``now``."""
        for consumer in consumers:
            if backfill_restarts(self._consumers.get(consumer.name), consumer):
                self.backfills[consumer.name] = BackfillProgress(now, 0, None, None)
            elif consumer.log is None or not consumer.log.backfill:
                self.backfills.pop(consumer.name, None)
            self._consumers[consumer.name] = consumer

    def unregister(self, names: Iterable[str]) -> None:
        """Stops waking these consumers; their cursors stay."""
        for name in names:
            self._consumers.pop(name, None)
            self.backfills.pop(name, None)

    def backfill_state(self, name: str) -> tuple[Consumer, BackfillProgress] | None:
        progress = self.backfills.get(name)
        return None if progress is None else (self._consumers[name], progress)

    def record_backfill(
        self,
        name: str,
        seen: BackfillProgress,
        *,
        after: str | None,
        sessions: int,
        done: bool,
        now: datetime,
    ) -> BackfillProgress | None:
        """Records a batch if the progress is still ``seen``; the progress as it is then."""
        current = self.backfills.get(name)
        if current is None or current != seen:
            return current
        moved = BackfillProgress(
            seen.started_at, seen.sessions + sessions, after, now if done else None
        )
        self.backfills[name] = moved
        return moved

    def pause(self, names: Iterable[str], now: datetime) -> None:
        """Pauses these consumers from ``now``; a paused one keeps its first time."""
        for name in names:
            self.paused.setdefault(name, now)

    def resume(self, names: Iterable[str]) -> list[str]:
        """Ends these consumers' pause; the names that were paused."""
        return [name for name in names if self.paused.pop(name, None) is not None]

    def listed(self) -> list[Consumer]:
        return [self._consumers[name] for name in sorted(self._consumers)]
