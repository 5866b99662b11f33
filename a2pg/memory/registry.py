"""The registry of log consumers in memory: who a write wakes when it names no consumers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..models import Consumer
from .cursors import refresh_types
from .state import SessionState


class Registry:
    """Registered log consumers by name."""

    def __init__(self) -> None:
        self._consumers: dict[str, Consumer] = {}

    def wake_set(self, consumers: Sequence[Consumer] | None) -> Sequence[Consumer]:
        """The log consumers a write wakes: those it names, else the registered ones."""
        return list(self._consumers.values()) if consumers is None else consumers

    def register(self, consumers: Sequence[Consumer], sessions: Iterable[SessionState]) -> None:
        """Stores each spec. A changed spec reaches the consumer's existing log cursors in
        every session at once, as ``refreshLogTypes`` would on their next write."""
        for consumer in consumers:
            self._consumers[consumer.name] = consumer
        for session in sessions:
            refresh_types(session, consumers)

    def unregister(self, names: Iterable[str]) -> None:
        """Stops waking these consumers; their cursors stay."""
        for name in names:
            self._consumers.pop(name, None)

    def listed(self) -> list[Consumer]:
        return [self._consumers[name] for name in sorted(self._consumers)]
