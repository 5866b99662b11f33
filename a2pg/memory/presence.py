"""In-memory presence: short-lived per-participant fields, last writer wins until expiry."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..contract.args import check_presence_read, check_presence_write
from ..contract.limits import Limits
from ..ids import Clock
from ..models import JSON, PresenceRow


@dataclass(frozen=True, slots=True)
class _Field:
    value_json: str
    seen_json: str
    at: datetime
    expires_at: datetime


class MemoryPresence:
    """Presence values by namespace, participant and field.

    A write wins per field unless the stored value is newer (by ``at``) and still
    live; equal ``at`` goes to the later write. ``None`` is stored as a tombstone so
    an older write cannot resurrect the field, and is never read.
    """

    def __init__(self, clock: Clock, limits: Limits) -> None:
        self._clock = clock
        self._limits = limits
        self._spaces: dict[str, dict[str, dict[str, _Field]]] = {}

    async def write(
        self,
        ns: str,
        participant: str,
        values: Mapping[str, JSON],
        *,
        at: datetime,
        seen: JSON,
        ttl: float,
    ) -> dict[str, JSON]:
        write = check_presence_write(
            ns, participant, values, at=at, seen=seen, ttl=ttl, limits=self._limits
        )
        now = self._clock()
        expires_at = now + timedelta(seconds=write.ttl)
        fields = self._spaces.get(write.ns, {}).get(write.participant, {})
        applied: dict[str, JSON] = {}
        for field, value_json in write.values.items():
            existing = fields.get(field)
            if existing is not None and existing.expires_at > now and existing.at > write.at:
                continue
            fields[field] = _Field(value_json, write.seen_json, write.at, expires_at)
            applied[field] = json.loads(value_json)
        if fields:
            self._spaces.setdefault(write.ns, {})[write.participant] = fields
        return applied

    async def read(self, ns: str) -> list[PresenceRow]:
        ns = check_presence_read(ns, limits=self._limits)
        now = self._clock()
        participants = self._spaces.get(ns, {})
        rows: list[PresenceRow] = []
        for participant in sorted(participants):
            fields = participants[participant]
            for field in sorted(fields):
                entry = fields[field]
                if entry.expires_at <= now:
                    del fields[field]
                elif entry.value_json != "null":
                    value, seen = json.loads(entry.value_json), json.loads(entry.seen_json)
                    rows.append(
                        PresenceRow(participant, field, value, seen, entry.at, entry.expires_at)
                    )
            if not fields:
                del participants[participant]
        if not participants:
            self._spaces.pop(ns, None)
        return rows
