"""Presence on PostgreSQL: per-participant fields, last writer wins until expiry."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from psycopg.rows import DictRow

from ..ids import Clock
from ..models import JSON, PresenceRow
from ..validation import Limits, check_name, check_presence_write
from . import codec

ReadFn = Callable[..., Awaitable[list[DictRow]]]


class PostgresPresence:
    """Presence values in ``a2_presence``. A write wins per field unless the stored value is
    newer (by ``at``) and still live; ``None`` is kept as a tombstone and never read.
    Each call is one autocommit statement."""

    def __init__(self, run: ReadFn, clock: Clock | None, limits: Limits) -> None:
        self._run = run
        self._clock = clock
        self._limits = limits

    def _now(self) -> datetime | None:
        return None if self._clock is None else self._clock()

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
        encoded = write.values
        if not encoded:
            return {}
        params: dict[str, Any] = {
            "ns": ns,
            "participant": participant,
            "fields": list(encoded),
            "values": list(encoded.values()),
            "seen": write.seen_json,
            "at": write.at,
            "ttl": timedelta(seconds=write.ttl),
            "now": self._now(),
        }
        rows = await self._run("presence_write", params, idempotent=True)
        applied = {row["field"] for row in rows}
        return {field: json.loads(text) for field, text in encoded.items() if field in applied}

    async def read(self, ns: str) -> list[PresenceRow]:
        check_name(ns, "presence namespace", self._limits)
        rows = await self._run("presence_read", {"ns": ns, "now": self._now()})
        return [
            PresenceRow(
                row["participant"],
                row["field"],
                row["value"],
                row["seen"],
                codec.utc(row["at"]),
                codec.utc(row["expires_at"]),
            )
            for row in rows
        ]
