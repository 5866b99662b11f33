"""Worker heartbeats in memory: each worker's last beat and when the store's clock saw it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime

from ..models import WorkerBeat, WorkerInfo


class Workers:
    """Worker rows by holder. Every time a row holds is the store's clock's (``started_at``
    too: the time of the holder's first beat from that host and pid)."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[WorkerBeat, datetime]] = {}

    def beat(self, beat: WorkerBeat, *, now: datetime) -> None:
        known = self._rows.get(beat.holder)
        same_run = known is not None and (known[0].host, known[0].pid) == (beat.host, beat.pid)
        started = known[0].started_at if known is not None and same_run else now
        self._rows[beat.holder] = (replace(beat, started_at=started), now)

    def forget(self, holders: Iterable[str]) -> None:
        for holder in holders:
            self._rows.pop(holder, None)

    def listed(self, *, now: datetime) -> list[WorkerInfo]:
        return [
            WorkerInfo(beat, seen, max(0.0, (now - seen).total_seconds()))
            for beat, seen in (self._rows[holder] for holder in sorted(self._rows))
        ]
